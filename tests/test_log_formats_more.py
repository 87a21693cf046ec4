"""More metric-log formats (issue 13): litgpt / lit-gpt, torchtune, LLaMA-Factory trainer_log.jsonl,
W&B CSV exports. Each sample is written by the test in the format's real line layout."""
from __future__ import annotations

import json

import pytest

from troubleshoot.loaders.logs import detect_format, iter_records


def _lines(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


SAMPLES = {
    "litgpt-old.txt": ("litgpt", [f"iter {i} step {(i + 3) // 4}: loss {8 - i * 0.01:.4f}, iter time: 153.21ms"
                                  + (" (step)" if i % 4 == 0 else "") for i in range(1, 201)]),
    "litgpt-new.txt": ("litgpt", [f"Epoch 1 | iter {i} step {(i + 3) // 4} | loss train: {8 - i * 0.01:.3f}, val: n/a | "
                                  f"iter time: 153.21 ms" + (" (step)" if i % 4 == 0 else "") for i in range(1, 201)]),
    "log_1700000000.txt": ("torchtune", [f"Step {i} | loss:{2.5 - i * 0.002:.4f} lr:2e-05 tokens_per_second_per_gpu:1523.2"
                                         for i in range(1, 201)]),
    "trainer_log.jsonl": ("jsonl", [json.dumps({"current_steps": i * 5, "total_steps": 1000, "loss": 2.0 - i * 0.003,
                                                "lr": 1e-4, "epoch": i * 0.01, "percentage": i / 2,
                                                "elapsed_time": "0:01:00", "remaining_time": "0:10:00"})
                                    for i in range(1, 201)]),
    "wandb_export.csv": ("csv", ['"Step","llama-sft-3 - train/loss","llama-sft-3 - train/loss__MIN","llama-sft-3 - train/loss__MAX"']
                         + [f'"{i * 10}","{2 - i * 0.004}","{2 - i * 0.004}","{2 - i * 0.004}"' for i in range(1, 201)]),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_format_is_recognised_and_read(tmp_path, name):
    fmt, lines = SAMPLES[name]
    path = _lines(tmp_path / name, lines)
    assert detect_format(path) == fmt
    train = [r for r in iter_records(path) if r.kind == "train"]
    assert len(train) == 200 and train[0].loss == pytest.approx(float(_first_loss(fmt, lines)))
    assert [r.iteration for r in train] == sorted(r.iteration for r in train)


def _first_loss(fmt, lines):
    if fmt == "jsonl":
        return json.loads(lines[0])["loss"]
    if fmt == "csv":
        return lines[1].split(",")[1].strip('"')
    return lines[0].split("loss")[1].replace("train", "").lstrip(": ").split(",")[0].split()[0]


def test_torchtune_progress_bar_and_litgpt_nan(tmp_path):
    bar = _lines(tmp_path / "stdout.txt", [f"1|{i}|Loss: {2.0 - i * 0.01:.4f}:  {i}%|##   | {i}/100 [00:{i:02d}<01:00]"
                                           for i in range(1, 60)])
    assert detect_format(bar) == "torchtune" and len(list(iter_records(bar))) == 59
    lit = _lines(tmp_path / "out.txt", [f"iter {i} step {i}: loss {'nan' if i > 50 else '3.2'}, iter time: 150.00ms"
                                         for i in range(1, 80)])
    losses = [r.loss for r in iter_records(lit) if r.kind == "train"]
    assert losses[50] != losses[50] and losses[0] == 3.2  # nan read as a value, not dropped


def test_wandb_min_max_columns_are_not_the_loss():
    from troubleshoot.loaders.logs.record import metric_slot

    assert metric_slot("run-7 - train/loss") == "loss"
    assert metric_slot("run-7 - train/loss__MIN") is None and metric_slot("run-7 - eval/loss") == "val_loss"
