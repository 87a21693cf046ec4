"""LlmfixCallback in a real (tiny) Hugging Face Trainer run: the faults of the plain-loop tests,
injected through the data collator, the scheduler or a forward hook."""
from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import livefactory as lf  # noqa: E402

from troubleshoot.live import LlmfixCallback  # noqa: E402

AT, STEPS = 70, 85


class ArmTransient(transformers.TrainerCallback):
    """Arms the one-off NaN hook right before step AT's forward."""

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step + 1 == AT:
            lf.arm_transient(model)


def train(tmp_path, fault: str | None = None, policy: str = "skip", lr_jump_at: int | None = None,
          accumulation: int = 1):
    torch.set_num_threads(1)
    model = lf.tiny_gpt2()
    gen = torch.Generator().manual_seed(1)
    data = [{"input_ids": lf.sequence(gen)} for _ in range(lf.ROWS * STEPS * accumulation)]
    calls = [0]

    def collate(rows):
        calls[0] += 1
        ids = torch.tensor([r["input_ids"] for r in rows])
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}
        hit = calls[0] == AT * accumulation and fault not in (None, "transient_nan")
        return lf.FAULTS[fault](model, batch) if hit else batch

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "run"), per_device_train_batch_size=lf.ROWS, max_steps=STEPS,
        learning_rate=3e-4, lr_scheduler_type="constant", logging_steps=1000, save_strategy="no",
        report_to=[], use_cpu=True, seed=0, disable_tqdm=True, gradient_accumulation_steps=accumulation)
    guard_cb = LlmfixCallback(policy=policy)
    callbacks = [guard_cb] + ([ArmTransient()] if fault == "transient_nan" else [])
    optimizers = (None, None)
    if lr_jump_at:  # optimizer step s uses the LR factor of scheduler step s - 1
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
        optimizers = (opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1e4 if s == lr_jump_at - 1 else 1.0))
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data, data_collator=collate,
                                   callbacks=callbacks, optimizers=optimizers)
    trainer.train()
    return trainer, guard_cb.guard


CASES = {  # fault: (top cause, replays, module)
    "nan_embeds": ("nan-loss.nonfinite-data", True, "transformer.drop"),
    "out_of_range": ("nan-loss.token-out-of-range", True, "transformer.wte"),
    "all_ignored": ("nan-loss.no-target-tokens", True, "(model)"),
    "transient_nan": ("nan-loss.hardware-fault", False, None),
}


@pytest.mark.parametrize("fault", sorted(CASES))
def test_trainer_fault_is_caught_at_its_step(tmp_path, fault):
    top, replays, module = CASES[fault]
    trainer, guard = train(tmp_path, fault)
    folder = tmp_path / "run" / "llmfix-incidents" / str(AT)
    assert guard.incidents == [folder]
    incident = json.loads((folder / "incident.json").read_text())
    diag = json.loads((folder / "diagnosis.json").read_text())
    assert incident["framework"] == "hf-trainer" and incident["grad_clip"] == 1.0
    assert incident["replay"]["reproduced"] is replays
    assert (incident["replay"]["first_module"] or incident["replay"]["error_module"]) == module
    assert diag["causes"][0]["id"] == top
    assert trainer.state.global_step == STEPS  # skip: the run went on to the end
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert math.isfinite(trainer.state.log_history[-1]["train_loss"])


def test_trainer_huge_lr_step(tmp_path):
    trainer, guard = train(tmp_path, lr_jump_at=AT - 1)
    incident = json.loads((guard.incidents[0] / "incident.json").read_text())
    diag = json.loads((guard.incidents[0] / "diagnosis.json").read_text())
    assert guard.incidents[0].name == str(AT) and incident["lr_jump"] is True
    assert diag["causes"][0]["id"].endswith(".lr-too-high")


def test_trainer_stop_ends_training_cleanly(tmp_path):
    trainer, guard = train(tmp_path, "nan_embeds", policy="stop")
    assert guard.stopped and trainer.state.global_step == AT
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())


def test_trainer_with_gradient_accumulation_keeps_the_bad_micro_batch(tmp_path):
    trainer, guard = train(tmp_path, "nan_embeds", accumulation=2)
    incident = json.loads((guard.incidents[0] / "incident.json").read_text())
    assert guard.incidents[0].name == str(AT) and incident["batches"][0]["micro_batch"] == 1
    assert incident["batches"][0]["nonfinite_keys"] == ["inputs_embeds"]
    assert trainer.state.global_step == STEPS
