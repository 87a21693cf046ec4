"""Two processes on gloo (CPU): the ranks agree with one all-reduce per step, skip together, and
rank 0 alone writes the shared files of the bundle, which names rank 1 as the first to see NaN."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import livedist  # noqa: E402

AT = 25


def test_two_ranks_agree_skip_together_and_name_the_first_rank(tmp_path):
    torch.multiprocessing.spawn(livedist.worker, args=(2, str(tmp_path), AT), nprocs=2, join=True)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    folder = tmp_path / "incidents" / str(AT)
    assert all(r["incidents"] == [str(folder)] for r in ranks)
    assert [r["steps"] for r in ranks] == [livedist.STEPS - 1] * 2         # both skipped step AT only
    assert ranks[0]["params"] == ranks[1]["params"] and all(r["finite"] for r in ranks)
    incident = json.loads((folder / "incident.json").read_text())
    assert incident["ranks"]["world"] == 2
    assert incident["ranks"]["nonfinite_loss"] == [1] and incident["ranks"]["first"] == [1]
    assert incident["ranks"]["nonfinite_grad"] == [0, 1]      # DDP averaged rank 1's NaN into rank 0
    assert incident["replay"]["rank"] == 1 and incident["replay"]["reproduced"] is True
    assert incident["replay"]["first_module"] == "0"          # the first Linear sees the NaN input
    assert sorted(p.name for p in folder.glob("batch*")) == ["batch-rank0.safetensors", "batch-rank1.safetensors"]
    diag = json.loads((folder / "diagnosis.json").read_text())
    assert diag["causes"][0]["id"] == "nan-loss.nonfinite-data"
