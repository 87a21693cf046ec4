"""The live guard in a plain PyTorch loop: each injected fault trips at its step, leaves a bundle,
replays, and is diagnosed; `llmfix probe BUNDLE` gives the same diagnosis later."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import livefactory as lf  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from troubleshoot.cli import main  # noqa: E402
from troubleshoot.live import Guard  # noqa: E402

AT, STEPS, LR = 70, 90, 3e-4


def run_loop(tmp_path, fault: str | None = None, policy: str = "skip", steps: int = STEPS, lr_jump_at: int | None = None):
    """Train the tiny GPT-2 for ``steps`` optimizer steps with the guard; the fault hits step AT."""
    torch.set_num_threads(1)
    model = lf.tiny_gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    guard = Guard(model, opt, policy=policy, out_dir=tmp_path / "incidents")
    gen = torch.Generator().manual_seed(1)
    losses = []
    for step in range(1, steps + 1):
        batch = lf.batch(gen)
        if step == AT and fault:
            batch = lf.FAULTS[fault](model, batch)
        for group in opt.param_groups:
            group["lr"] = 3.0 if step == lr_jump_at else LR
        with guard.watch(batch):
            loss = model(**batch).loss
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if guard.after_backward(loss, grad_norm=norm):
                opt.step()
            opt.zero_grad()
            losses.append(float(loss.detach()))
        if guard.stopped:
            break
    return guard, losses


def bundle_of(guard, step: int) -> tuple:
    assert [p.name for p in guard.incidents] == [str(step)]
    folder = guard.incidents[0]
    return folder, json.loads((folder / "incident.json").read_text()), json.loads((folder / "diagnosis.json").read_text())


CASES = {  # fault: (trips, top cause, replays, first non-finite module or raising module)
    "nan_embeds": ({"nonfinite-loss", "nonfinite-grad"}, "nan-loss.nonfinite-data", True, "transformer.drop"),
    "out_of_range": ({"exception"}, "nan-loss.token-out-of-range", True, "transformer.wte"),
    "all_ignored": ({"nonfinite-loss", "no-target"}, "nan-loss.no-target-tokens", True, "(model)"),
    "transient_nan": ({"nonfinite-loss", "nonfinite-grad"}, "nan-loss.hardware-fault", False, None),
}


@pytest.mark.parametrize("fault", sorted(CASES))
def test_fault_trips_replays_and_ranks_the_cause(tmp_path, fault):
    trips, top, replays, module = CASES[fault]
    guard, losses = run_loop(tmp_path, fault)
    folder, incident, diag = bundle_of(guard, AT)
    assert set(incident["trips"]) == trips
    assert incident["replay"]["reproduced"] is replays
    rep = incident["replay"]
    assert (rep["first_module"] or rep["error_module"]) == module
    assert diag["schema"] == "llmfix/diagnosis-v1"
    assert diag["causes"][0]["id"] == top
    assert diag["symptoms"][0]["id"] == "nan-loss"
    if fault != "out_of_range":  # the guard saw it; an IndexError has no loss of its own to see
        assert diag["symptoms"][0]["observed"] is True
    assert {"incident.json", "metrics.jsonl", "batch.safetensors"} <= {p.name for p in folder.iterdir()}
    assert math.isfinite(losses[-1]) and len(losses) >= STEPS - 1  # skip: the run went on, finite


def test_an_exception_is_not_a_nan_its_text_names_the_symptom(tmp_path):
    guard, losses = run_loop(tmp_path, "one_off_oom")
    folder, incident, diag = bundle_of(guard, AT)
    assert incident["trips"] == ["exception"] and "loss" not in incident["values"]
    assert incident["replay"]["reproduced"] is False and incident["replay"]["error"] is None
    symptoms = [s["id"] for s in diag["symptoms"]]
    assert symptoms[0] == "system-failure" and "nan-loss" not in symptoms
    assert math.isfinite(losses[-1])


def test_huge_lr_step_is_caught_at_the_next_step_and_blamed_on_the_lr(tmp_path):
    guard, losses = run_loop(tmp_path, lr_jump_at=AT - 1)
    folder, incident, diag = bundle_of(guard, AT)
    assert "loss-spike" in incident["trips"] or "nonfinite-loss" in incident["trips"]
    assert incident["lr_jump"] is True and incident["replay"]["follows_weights"] is True
    assert diag["causes"][0]["id"].endswith(".lr-too-high")
    assert math.isfinite(losses[-1])


def test_probe_on_the_bundle_gives_the_saved_diagnosis(tmp_path):
    guard, _ = run_loop(tmp_path, "nan_embeds")
    folder, _, saved = bundle_of(guard, AT)
    result = CliRunner().invoke(main, ["probe", str(folder), "--json"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.output) == saved
    text = CliRunner().invoke(main, ["probe", str(folder)]).output
    assert "incident.replay" in text and "transformer.drop" in text


def test_metrics_window_reads_as_a_jsonl_log(tmp_path):
    from troubleshoot.loaders.logs import iter_records

    guard, _ = run_loop(tmp_path, "nan_embeds")
    records = list(iter_records(guard.incidents[0] / "metrics.jsonl"))
    assert [r.iteration for r in records][-1] == AT and len(records) == 64
    assert math.isnan(records[-1].loss) and records[-2].grad_norm > 0


def test_stop_ends_the_run_without_applying_the_bad_update(tmp_path):
    guard, losses = run_loop(tmp_path, "nan_embeds", policy="stop")
    assert guard.stopped and len(losses) == AT
    model = guard.model
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_warn_applies_the_update_and_only_reports(tmp_path):
    guard, losses = run_loop(tmp_path, "nan_embeds", policy="warn", steps=AT + 2)
    assert [p.name for p in guard.incidents][:1] == [str(AT)]
    assert not all(torch.isfinite(p).all() for p in guard.model.parameters())


def test_a_healthy_run_of_hundreds_of_steps_trips_nothing(tmp_path):
    guard, losses = run_loop(tmp_path, steps=300)
    assert guard.incidents == [] and losses[-1] < losses[0] - 1.0


def test_importing_the_guard_does_not_import_torch():
    code = "import troubleshoot.live, sys; assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_broken_incident_file_is_a_one_line_error(tmp_path):
    (tmp_path / "incident.json").write_text("{not json")
    result = CliRunner().invoke(main, ["probe", str(tmp_path)])
    assert result.exit_code == 2 and "incident.json: unreadable JSON" in result.output


def test_fp16_loss_scale_collapse_trips_once_and_overflows_alone_do_not(tmp_path):
    """A GradScaler halving on every step: the overflows themselves are the scaler's business,
    a scale 16x below its maximum is an incident."""
    torch.set_num_threads(1)
    model = lf.tiny_gpt2()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    guard = Guard(model, opt, policy="warn", scaler=scaler, out_dir=tmp_path / "incidents")
    gen = torch.Generator().manual_seed(1)
    for step in range(1, 41):
        batch = lf.batch(gen)
        with guard.watch(batch):
            loss = model(**batch).loss
            scaler.scale(loss).backward()
            if step >= 30:  # an overflow on every step from 30 on
                model.lm_head.weight.grad[0, 0] = float("inf")
            if guard.after_backward(loss):
                scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    assert [p.name for p in guard.incidents] == ["34"]  # the fifth overflow runs at 1/16 of the scale
    incident = json.loads((guard.incidents[0] / "incident.json").read_text())
    assert incident["trips"] == ["loss-scale-collapse"] and incident["precision"] == "fp16"
    diag = json.loads((guard.incidents[0] / "diagnosis.json").read_text())
    assert diag["symptoms"][0]["id"] == "fp16-overflow"
    assert diag["causes"][0]["id"] == "fp16-overflow.loss-scale-collapse"


def test_supervised_tokens_come_from_labels_or_a_megatron_loss_mask():
    from troubleshoot.live.signals import targets

    ids = torch.ones(2, 4, dtype=torch.long)
    assert targets([{"input_ids": ids, "labels": torch.full((2, 4), -100)}]).item() == 0
    assert targets([{"tokens": ids, "loss_mask": torch.tensor([[0.0, 1, 1, 0], [0, 0, 0, 0]])}]).item() == 2
    assert targets([{"input_ids": ids, "labels": ids}, {"input_ids": ids, "labels": ids[:1]}]).item() == 4
    assert targets([{"input_ids": ids}]) is None
