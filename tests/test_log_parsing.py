"""Log formats: sniffing by content, line parsing, streaming readers, and garbage input."""
from __future__ import annotations

import json
import math
import os
import sys
import types
from pathlib import Path

import pytest

import logfactory as LF
from troubleshoot.errors import ArtifactError
from troubleshoot.loaders import detect
from troubleshoot.loaders import logs as L
from troubleshoot.loaders.logs import metrics as LM
from troubleshoot.loaders.logs import record as LR
from troubleshoot.loaders.logs import text as LT
from troubleshoot.probes import ProbeContext
from troubleshoot.probes import logs as P

# seed 002_2969b0ea5896ed69.txt, verbatim
SEED_7000 = (" iteration     7000/  159576 | consumed samples:       260912 | elapsed time per iteration (ms):"
             " 18706.1 | learning rate: 6.000E-05 | global batch size:    96 | lm loss: 6.444662E+00 | loss "
             "scale: 2048.0 | grad norm: 98258.265 | num zeros: 0.0 | number of skipped iterations:   0 | "
             "number of nan iterations:   0 |")
SEED_VAL = " validation loss at iteration 7000 | lm loss value: 7.174200E+00 | lm loss PPL: 1.305315E+03 |"


def records(tmp_path: Path, text: str | bytes, name: str = "train.log") -> list[L.Record]:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return list(L.iter_records(p))


def probe(path: Path, **kw):
    return P.run(ProbeContext([detect(path)], **kw))


# --------------------------------------------------------------------------------------------
# sniffing

@pytest.mark.parametrize("writer, detail", [
    (lambda p, r: LF.write_megatron(p / "a.out", r), "megatron text log"),
    (lambda p, r: LF.write_nanogpt(p / "a.out", r), "nanogpt text log"),
    (lambda p, r: LF.write_modded(p / "a.txt", r), "nanogpt text log"),
    (lambda p, r: LF.write_hf_stdout(p / "a.out", r), "hf trainer stdout"),
    (lambda p, r: LF.write_trainer_state(p / "state.json", r), "hf trainer_state.json"),
    (lambda p, r: LF.write_jsonl(p / "m.jsonl", r), "jsonl metrics"),
    (lambda p, r: LF.write_csv(p / "m.csv", r), "csv metrics"),
])
def test_sniff_by_content(tmp_path, writer, detail):
    path = writer(tmp_path, LF.simulate(LF.Run(iters=500, interval=10)))
    art = L.sniff(path)
    assert art is not None and art.kind == "log" and art.detail == detail
    renamed = path.rename(tmp_path / "noextension")  # content, not the name, decides
    assert L.sniff(renamed).detail == detail


def test_sniff_finds_megatron_lines_after_a_long_preamble(tmp_path):
    p = tmp_path / "slurm-123.x"
    p.write_text("+ export X=1\n" * 20000 + SEED_7000 + "\n")  # ~260 KB of shell trace first
    assert L.sniff(p).detail == "megatron text log"


def test_sniff_rejects_non_logs(tmp_path):
    (tmp_path / "batch.jsonl").write_text('{"input_ids": [1, 2], "text": "hi", "loss": 1.0}\n')
    (tmp_path / "notes.md").write_text("# notes\nnothing to see\n")
    (tmp_path / "w.pt").write_bytes(b"PK\x03\x04" + os.urandom(200))
    for name in ("batch.jsonl", "notes.md", "w.pt"):
        assert L.sniff(tmp_path / name) is None, name
    assert L.sniff(tmp_path) is None  # a folder without logs: the checkpoint sniffer's business


def test_binary_file_named_like_a_log_is_a_clean_error(tmp_path):
    p = tmp_path / "train.log"
    p.write_bytes(bytes(range(256)) * 40)
    with pytest.raises(ArtifactError, match="binary content, not a text log"):
        detect(p)


def test_tensorboard_header_is_recognised(tmp_path):
    p = tmp_path / "whatever.bin"
    p.write_bytes(b"\x18\x00\x00\x00\x00\x00\x00\x00\xa3\x7fK\x22\t\x00\x00\x00\x00\x00\x00\xf0?\x1a\rbrain.Event:2")
    assert L.sniff(p).detail == "tensorboard events"


# --------------------------------------------------------------------------------------------
# text formats

def test_megatron_seed_lines_verbatim(tmp_path):
    recs = records(tmp_path, "\n".join(["-" * 96, SEED_7000, "-" * 96, SEED_VAL, " [...]"]) + "\n")
    train, val, gap = recs
    assert (train.kind, train.iteration, train.loss, train.lr) == ("train", 7000, 6.444662, 6e-05)
    assert (train.loss_scale, train.grad_norm, train.skipped, train.nan_count) == (2048.0, 98258.265, 0, 0)
    assert math.isclose(train.seconds, 18.7061) and train.batch == 96 and train.line == 2
    assert (val.kind, val.iteration, val.val_loss) == ("val", 7000, 7.1742)
    assert gap.kind == "gap"


def test_megatron_variants(tmp_path):
    rank_prefix = ("[default7]: iteration    31214/  115311 | consumed samples:     47768496 | consumed tokens:"
                   "  97829879808 | elapsed time per iteration (s): 106.46 | learning rate: 5.279E-05 | global "
                   "batch size:  2048 | lm loss: 2.198845E+00 | grad norm: 0.242 | num zeros: 0.0 | number of "
                   "skipped iterations:   0 | number of nan iterations:   0 | samples per second: 19.238 |")
    no_loss = (" iteration     9027/  159576 | consumed samples:       540656 | elapsed time per iteration "
               "(ms): 63274.6 | learning rate: 6.000E-05 | global batch size:   192 | loss scale: 8192.0 | "
               "grad norm: 20609.780 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan "
               "iterations:   0 |")
    nan_line = SEED_7000.replace("6.444662E+00", "nan").replace("nan iterations:   0", "nan iterations:   3")
    new_style = ("[2024-05-20 10:00:00] iteration      100/  500000 | consumed samples:        51200 | elapsed "
                 "time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 400.1 | learning rate: "
                 "1.500000E-04 | global batch size:   512 | lm loss: 7.234567E+00 | loss scale: 1.0 | grad norm: "
                 "2.345 | number of skipped iterations:   0 | number of nan iterations:   0 |")
    val_new = " validation loss at iteration 100 on validation set | lm loss value: 7.100000E+00 | lm loss PPL: 1.2E+03 |"
    saved = "  successfully saved checkpoint from iteration     100 to /ck [ t 1/1, p 1/1 ]"
    a, b, c, d, e, f = records(tmp_path, "\n".join([rank_prefix, no_loss, nan_line, new_style, val_new, saved]))
    assert (a.iteration, a.loss, a.loss_scale, a.grad_norm, a.seconds) == (31214, 2.198845, None, 0.242, 106.46)
    assert (b.iteration, b.loss, b.loss_scale) == (9027, None, 8192.0)
    assert math.isnan(c.loss) and c.nan_count == 3
    assert (d.iteration, d.loss, d.lr, d.grad_norm, d.batch) == (100, 7.234567, 1.5e-4, 2.345, 512.0)
    assert (e.kind, e.iteration, e.val_loss) == ("val", 100, 7.1) and (f.kind, f.iteration) == ("save", 100)


def test_deepspeed_lines_interleaved(tmp_path):
    text = "\n".join([
        "[2023-08-15 06:31:42,452] [INFO] [logging.py:96:log_dist] [Rank 0] step=1, skipped=1, lr=[0.0, 0.0], mom=[(0.9, 0.95)]",
        "[2023-08-15 06:31:42,452] [INFO] [fused_optimizer.py:363:_update_scale] Reducing dynamic loss scale from 65536 to 32768.0",
        "steps: 1 loss: 10.6554 iter time (s): 4.218 samples/sec: 7.586",
        SEED_7000.replace("7000/", "   1/"),
        "[2022-01-19 13:16:17,683] [INFO] [stage_1_and_2.py:1644:step] [deepscale] OVERFLOW! Rank 0 Skipping step. "
        "Attempted loss scale: 1048576.0, reducing to 524288.0",
        "steps: 2 loss: 10.6521 iter time (s): 1.337 samples/sec: 23.934",
        SEED_7000.replace("7000/", "   2/"),
    ])
    kinds = [(r.kind, r.iteration) for r in records(tmp_path, text)]
    # the DeepSpeed 'steps:' lines duplicate Megatron's and are dropped
    assert kinds == [("dsstep", 1), ("overflow", None), ("train", 1), ("overflow", None), ("train", 2)]


def test_deepspeed_alone(tmp_path):
    text = "\n".join(f"[Rank 0] step={i}, skipped=0, lr=[1e-4, 1e-4], mom=[(0.9, 0.95)]\n"
                     f"steps: {i} loss: {10 - i * 0.01:.4f} iter time (s): 1.2 samples/sec: 26" for i in range(1, 40))
    p = tmp_path / "ds.log"
    p.write_text(text)
    assert L.sniff(p).detail == "deepspeed text log"
    train = [r for r in L.iter_records(p) if r.kind == "train"]
    assert len(train) == 39 and train[-1].iteration == 39


def test_save_lines(tmp_path):
    text = "\n".join([
        "saving checkpoint at iteration    6210 to /gpfsscratch/checkpoints",
        "  successfully saved checkpoint at iteration    6210 to /gpfsscratch/checkpoints",
        "[2022-01-19] [INFO] [engine.py:3000] Saving model checkpoint: /ck/global_step6300/mp_rank_00_model_states.pt",
        "Saving model checkpoint to out/checkpoint-6400",
        " loading checkpoint from /ck at iteration 6000",
    ])
    got = [(r.kind, r.iteration) for r in records(tmp_path, text)]
    assert got == [("save", 6210), ("save", 6210), ("save", 6300), ("save", 6400), ("load", 6000)]


def test_nanogpt_and_modded(tmp_path):
    text = "\n".join(["iter 0: loss 10.9264, time 95130.82ms, mfu -100.00%", "iter 110: loss nan, time 440.71ms, mfu 48.31%",
                      "step 250: train loss 4.1, val loss 4.2", "saving checkpoint to out",
                      "step:125/20344 val_loss:5.2369 train_time:197991ms step_avg:1721.66ms",
                      "step:126/20344 train_loss:5.1 train_time:1ms step_avg:nanms"])
    r = records(tmp_path, text)
    assert [(x.kind, x.iteration) for x in r] == [("train", 0), ("train", 110), ("val", 250), ("save", 250),
                                                  ("val", 125), ("train", 126)]
    assert math.isclose(r[0].seconds, 95.13082) and math.isnan(r[1].loss) and r[4].val_loss == 5.2369


def test_hf_printed_dicts_with_tqdm(tmp_path):
    text = ("  5%|▌         | 50/1000 [00:10<03:00,  5.2it/s]{'loss': 2.3104, 'grad_norm': 1.25, 'learning_rate': "
            "4.9e-05, 'epoch': 0.05}\n{'loss': nan, 'grad_norm': nan, 'learning_rate': 4.8e-05, 'epoch': 0.1}\n"
            "{'eval_loss': 2.5, 'eval_runtime': 3.2, 'epoch': 0.1}\n"
            "{'train_runtime': 100.0, 'train_samples_per_second': 3.0, 'train_loss': 2.4, 'epoch': 1.0}\n")
    r = records(tmp_path, text, "out.txt")
    assert [(x.kind, x.iteration) for x in r] == [("train", 50), ("train", 50), ("val", 50)]
    assert (r[0].loss, r[0].grad_norm, r[0].lr) == (2.3104, 1.25, 4.9e-05) and math.isnan(r[1].loss)


def test_metric_keys():
    assert LR.metric_slot("train/learning_rate") == "lr" and LR.metric_slot("lr") == "lr"
    assert LR.metric_slot("lm loss") == "loss" and LR.metric_slot("eval_loss") == "val_loss"
    assert LR.metric_slot("grad-norm") == "grad_norm" and LR.metric_slot("_step") == "step"
    assert LR.metric_slot("train/acc_0") is None


def test_jsonl_and_csv(tmp_path):
    (tmp_path / "m.jsonl").write_text('{"_step": 1, "train/loss": 3.5, "train/lr": 1e-4}\nnot json\n'
                                      '{"_step": 2, "train/loss": 3.4, "grad_norm": 1.0}\n')
    r = list(L.iter_records(tmp_path / "m.jsonl"))
    assert [(x.kind, x.iteration, x.loss) for x in r] == [("train", 1, 3.5), ("train", 2, 3.4)]
    (tmp_path / "m.csv").write_text("step,loss,lr\n1,3.5,0.0001\n2,,0.0001\n3,nan,0.0001\n")
    r = list(L.iter_records(tmp_path / "m.csv"))
    assert [x.iteration for x in r] == [1, 3] and math.isnan(r[1].loss)


# --------------------------------------------------------------------------------------------
# trainer_state.json, streamed

def test_trainer_state_streams_across_chunks(tmp_path, monkeypatch):
    rows = LF.simulate(LF.Run(iters=3000, interval=10, fp16=False))
    p = LF.write_trainer_state(tmp_path / "trainer_state.json", rows, save_steps=500, lr_key="lr")
    monkeypatch.setattr(LM, "CHUNK", 97)  # every entry straddles a refill
    recs = list(L.iter_records(p))
    train = [r for r in recs if r.kind == "train"]
    assert len(train) == 300 and train[0].lr == rows[0]["lr"] and train[-1].iteration == 3000
    assert len([r for r in recs if r.kind == "val"]) == 3
    assert ("meta", 500) in [(r.kind, r.iteration) for r in recs]


def test_truncated_trainer_state_gives_a_partial_reading(tmp_path):
    p = LF.write_trainer_state(tmp_path / "trainer_state.json", LF.simulate(LF.Run(iters=2000, interval=10)))
    text = p.read_text()
    p.write_text(text[: len(text) // 2])
    obs = probe(p)
    assert any(f.id == "logs.truncated" and f.severity == "warning" for f in obs.findings)
    p.write_text(text[:200])
    with pytest.raises(ArtifactError, match="truncated trainer_state.json"):
        P.run(ProbeContext([detect(p)]))


# --------------------------------------------------------------------------------------------
# tensorboard (optional dependency)

def _fake_tensorboard(monkeypatch, events):
    loader_mod = types.ModuleType("tensorboard.backend.event_processing.event_file_loader")

    class EventFileLoader:
        def __init__(self, path):
            self.path = path

        def Load(self):
            return iter(events)
    loader_mod.EventFileLoader = EventFileLoader
    for name in ("tensorboard", "tensorboard.backend", "tensorboard.backend.event_processing"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, loader_mod.__name__, loader_mod)


class _Value:
    def __init__(self, tag, v):
        self.tag, self.simple_value = tag, v

    def WhichOneof(self, _):
        return "simple_value"


def _event(step, tag, v):
    return types.SimpleNamespace(step=step, summary=types.SimpleNamespace(value=[_Value(tag, v)]))


def test_tensorboard_scalars_through_the_optional_package(tmp_path, monkeypatch):
    events = [types.SimpleNamespace(step=0, summary=types.SimpleNamespace(value=[]))]
    for step in range(1, 60):
        events += [_event(step, "lm loss", 5.0 - step * 0.01), _event(step, "learning-rate", 1e-4),
                   _event(step, "grad-norm", 1.0)]
    events.append(_event(60, "lm loss", float("nan")))
    _fake_tensorboard(monkeypatch, events)
    p = tmp_path / "events.out.tfevents.1.host"
    p.write_bytes(b"\x18\x00\x00\x00\x00\x00\x00\x00\xa3\x7fK\x22brain.Event:2")
    obs = probe(p)
    assert obs.facts["logs.nan_iteration"].value == 60
    assert obs.facts["logs.lr_peak"].value == 1e-4


def test_tensorboard_missing_is_an_info_finding(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    p = tmp_path / "events.out.tfevents.1.host"
    p.write_bytes(b"\x18\x00\x00\x00\x00\x00\x00\x00\xa3\x7fK\x22brain.Event:2")
    obs = probe(p)
    assert [f.id for f in obs.findings] == ["logs.tensorboard_missing"]
    assert "pip install tensorboard" in obs.findings[0].message


# --------------------------------------------------------------------------------------------
# garbage in, clean message or partial result out

def test_one_huge_line_is_read_in_bounded_memory(tmp_path):
    import tracemalloc

    p = tmp_path / "train.log"
    with open(p, "wb") as f:
        f.write((SEED_7000 + "\n").encode())
        for _ in range(50):
            f.write(b"z" * (1 << 20))  # one 50 MB line, no newline inside
        f.write(("\n" + SEED_7000.replace("7000/", "7010/") + "\n").encode())
    tracemalloc.start()
    lines = [(n, len(t)) for n, t in LT.iter_lines(p)]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [n for n, _ in lines] == [1, 2, 3] and lines[1][1] == LT.MAX_LINE
    assert peak < 8 * LT.CHUNK  # a few chunks, never the line
    assert [r.iteration for r in L.iter_records(p) if r.kind == "train"] == [7000, 7010]


def test_garbage_mixed_encodings_and_a_cut_last_line(tmp_path):
    rows = LF.simulate(LF.Run(iters=1000, interval=10))
    lines = [LF.megatron_line(r["it"], 1000, r["loss"], r["lr"], r["ls"], r["gn"]) for r in rows]
    blob = ("\n".join(lines[:50]) + "\n").encode() + b"\x00\xff\xfe caf\xe9 \x80\x81 garbage\r\n" \
        + "Traceback (most recent call last):\n  File \"x.py\", line 3\n".encode() \
        + ("\n".join(lines[50:]) + "\n").encode()[:-60]
    p = tmp_path / "train.log"
    p.write_bytes(blob)
    obs = probe(p)
    summary = next(f for f in obs.findings if f.id == "logs.summary")
    assert summary.value["records"] == 100 and summary.value["last"] == 1000
    assert not [f for f in obs.findings if f.severity == "error"]


def test_utf16_log(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(SEED_7000 + "\n" + SEED_VAL + "\n", encoding="utf-16")
    assert L.sniff(p).detail == "megatron text log"
    assert [r.kind for r in L.iter_records(p)] == ["train", "val"]


def test_text_without_metrics(tmp_path):
    p = tmp_path / "crash.log"
    p.write_text("starting\nTraceback (most recent call last):\n  File \"train.py\", line 9\n"
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB\n")
    obs = probe(p)
    assert obs.facts["logs.oom_phase"].value == "train"
    assert any(f.id == "logs.oom" and f.severity == "error" for f in obs.findings)
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(ArtifactError, match="empty file"):
        detect(empty)


def test_find_logs_in_checkpoint_folders(tmp_path):
    rows = LF.simulate(LF.Run(iters=600, interval=10, fp16=False))
    for step in (500, 1000):
        (tmp_path / f"checkpoint-{step}").mkdir()
        LF.write_trainer_state(tmp_path / f"checkpoint-{step}" / "trainer_state.json", rows)
    (tmp_path / "runs" / "May01").mkdir(parents=True)
    (tmp_path / "runs" / "May01" / "events.out.tfevents.123.host").write_bytes(b"x")
    found = L.find_logs_in(tmp_path)
    assert found[0] == tmp_path / "checkpoint-1000" / "trainer_state.json"
    assert found[1].name.startswith("events.out.tfevents")
    assert L.find_logs_in(tmp_path / "checkpoint-500") == [tmp_path / "checkpoint-500" / "trainer_state.json"]


def test_a_folder_of_logs_is_probed(tmp_path):
    rows = LF.simulate(LF.Run(iters=2000, interval=10, fp16=False, nan_at=1500))
    (tmp_path / "out" / "checkpoint-1000").mkdir(parents=True)
    LF.write_trainer_state(tmp_path / "out" / "checkpoint-1000" / "trainer_state.json", rows)
    art = L.sniff(tmp_path / "out")
    assert (art.kind, art.detail) == ("log", "folder of logs")
    obs = P.run(ProbeContext([art]))
    assert obs.facts["logs.nan_iteration"].value == 1500
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.md").write_text("x")
    assert L.sniff(tmp_path / "empty") is None


def test_json_state_without_history_is_refused(tmp_path):
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps({"global_step": 5, "log_history_missing": []}))
    assert L.sniff(p) is None
