"""Torch files read lazily (loaders/torchzip.py, loaders/pickle_memo.py): the same tensors as
``torch.load(weights_only=True)``, and memory per tensor bounded (issue 14: 100,000 tiny tensors
must probe within 400 MiB; bench/bench_many_tensors.py measures the full 100k)."""
from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
from pathlib import Path

import ckptfactory as cf
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from troubleshoot.loaders.pickle_memo import prune_memo
from troubleshoot.loaders.tensors import load_pickle
from troubleshoot.loaders.torchzip import StoredTensor, is_tensor, load_lazy

ROOT = Path(__file__).resolve().parent.parent
# Peak RSS a probe may add per tensor, measured as the slope between 5k and 25k tensors
# (docs/resource-policy.md "Budgets of a whole run"): 0.4-0.5 KB measured; torch.load alone took
# 2.2 KB. With python + torch at ~236 MiB, 1 KB keeps 100,000 tensors under 400 MiB.
MAX_BYTES_PER_TENSOR = 1024

values = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats(allow_nan=False)
                      | st.text(max_size=5) | st.binary(max_size=5),
                      lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                      | st.dictionaries(st.text(max_size=4), inner, max_size=4), max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(values, st.sampled_from([2, 4, 5]))
def test_pruned_pickle_loads_the_same_object(obj, protocol):
    shared = [obj, "x"]
    whole = {"a": shared, "b": shared, "c": obj}  # shared references must survive the pruning
    data = pickle.dumps(whole, protocol=protocol)
    back = pickle.load(prune_memo(data))
    assert back == whole and back["a"] is back["b"]


def test_pruning_drops_unread_puts():
    data = pickle.dumps([(i, str(i)) for i in range(1000)], protocol=2)
    pruned = prune_memo(data).getvalue()
    assert pickle.loads(pruned) == pickle.loads(data)
    assert len(pruned) < len(data) - 2000  # 2000 BINPUTs of 2+ bytes gone


def _saved(tmp_path: Path, obj, name="x.pt") -> Path:
    torch.save(obj, tmp_path / name)
    return tmp_path / name


def test_lazy_tensors_equal_torch_load(tmp_path):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    lin = torch.nn.Linear(3, 2)
    obj = {"model": {"w": base, "view": base[1:, ::2], "t": base.t(), "tied": base,
                     "bf16": base.to(torch.bfloat16), "half": base.half(), "ids": torch.arange(5),
                     "mask": torch.tensor([True, False]), "scalar": torch.tensor(3.5), "empty": torch.empty(0, 4),
                     "param": lin.weight},
           "iteration": 7, "args": argparse.Namespace(lr=0.1), "nested": [1, (2.5, None)]}
    path = _saved(tmp_path, obj)
    lazy = load_lazy(path, allow_namespace=True)
    with torch.serialization.safe_globals([argparse.Namespace]):
        ref = torch.load(path, weights_only=True)
    assert lazy["model"]["tied"] is lazy["model"]["w"]  # one object, as torch.save wrote it
    for name, t in ref["model"].items():
        got = lazy["model"][name]
        assert isinstance(got, StoredTensor) and is_tensor(got) and got.shape == tuple(t.shape)
        loaded = got.load()
        assert loaded.dtype == t.dtype and torch.equal(loaded, t.detach()), name
    assert lazy["iteration"] == 7 and lazy["args"].lr == 0.1 and lazy["nested"] == [1, (2.5, None)]


def test_anything_beyond_plain_tensors_goes_to_torch_load(tmp_path):
    """A global outside the lazy reader's list (here torch.device) is not refused by it: torch's
    weights-only loader decides, as before."""
    path = _saved(tmp_path, {"w": torch.ones(2), "dev": torch.device("cpu")})
    obj = load_pickle(path)
    assert isinstance(obj["w"], torch.Tensor) and obj["dev"] == torch.device("cpu")


# --- memory per tensor, in child processes ------------------------------------------------------

LAUNCH = """
import os, subprocess, sys
p = subprocess.Popen([sys.executable, "-m", "troubleshoot", "probe", "--json", sys.argv[1]], stdin=subprocess.DEVNULL,
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
out = p.stdout.read()
_, status, usage = os.wait4(p.pid, 0)
print(usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status))
sys.stdout.write(out.decode())
"""


def probe_peak(path: Path) -> tuple[int, set[str]]:
    """Peak RSS of ``llmfix probe --json PATH`` and its finding ids. Spawned through a small
    launcher: Linux carries the spawning process's peak RSS over fork and exec, and this test
    process is large."""
    done = subprocess.run([sys.executable, "-c", LAUNCH, str(path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=True)
    head, _, body = done.stdout.partition("\n")
    rss, code = map(int, head.split())
    assert code in (0, 1), done.stdout
    return rss, {f["id"] for f in json.loads(body)["findings"]}


@pytest.mark.parametrize("layout, nan_id", [("pt", "weights.nonfinite"), ("optimizer", "optimizer.nonfinite")])
def test_peak_memory_per_tensor_is_bounded(tmp_path, layout, nan_id):
    small, large = 5_000, 25_000
    peaks = {}
    for n in (small, large):
        rss, found = probe_peak(cf.many_tensors(tmp_path / str(n), layout, n))
        assert nan_id in found  # the one NaN among them is still found
        peaks[n] = rss
    tensors = (large - small) * (3 if layout == "optimizer" else 1)  # step, exp_avg, exp_avg_sq
    per_tensor = (peaks[large] - peaks[small]) / tensors
    assert per_tensor < MAX_BYTES_PER_TENSOR, f"{per_tensor:.0f} bytes per tensor"

