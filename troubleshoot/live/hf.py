"""``LlmfixCallback``: the live guard in a Hugging Face ``Trainer`` (and TRL trainers built on it).

    trainer = Trainer(model, args, train_dataset=ds, callbacks=[LlmfixCallback()])

Bundles go to ``<output_dir>/llmfix-incidents/<step>/``. A ``TrainerCallback`` is not given the
step's loss, batch or gradient norm, so at ``on_train_begin`` the callback finds its ``Trainer``
(pass ``trainer=`` to skip the search) and wraps three of its methods on that instance only:
``training_step`` (keeps a reference to each micro-batch and its loss, turns an exception such as
the CPU ``IndexError`` of an out-of-range token id into an incident), ``_get_grad_norm`` (keeps
the norm the Trainer computed anyway when clipping) and the optimizer's and scheduler's ``step``
(so that ``skip`` can discard one update). The judgement runs in ``on_pre_optimizer_step``,
after clipping and before the weights change; ``stop`` sets ``control.should_training_stop``.
"""
from __future__ import annotations

import functools
import logging
import sys
from pathlib import Path

from transformers import Trainer, TrainerCallback

from .guard import Guard

log = logging.getLogger("llmfix.live")


class LlmfixCallback(TrainerCallback):
    """Guard every optimizer step of a Trainer run; ``policy`` is warn, skip or stop."""

    def __init__(self, policy: str = "warn", out_dir: str | Path | None = None, max_incidents: int = 5,
                 replay: bool = True, trainer: Trainer | None = None) -> None:
        self.policy, self.out_dir, self.max_incidents, self.replay = policy, out_dir, max_incidents, replay
        self.trainer = trainer
        self.guard: Guard | None = None
        self._grad_norm = None
        self._discard = False

    # ------------------------------------------------------------------------------ set-up
    def on_train_begin(self, args, state, control, model=None, optimizer=None, lr_scheduler=None, **kwargs):
        trainer = self.trainer or _calling_trainer()
        if trainer is None:
            log.warning("llmfix: LlmfixCallback could not find its Trainer; pass LlmfixCallback(trainer=trainer)")
            return
        precision = "fp16" if args.fp16 else "bf16" if args.bf16 else "fp32"
        scaler = getattr(trainer.accelerator, "scaler", None)
        self.guard = Guard(
            trainer.model, optimizer, policy=self.policy,
            out_dir=self.out_dir or Path(args.output_dir) / "llmfix-incidents",
            scaler=scaler,
            loss_fn=lambda m, batch: trainer.compute_loss(m, trainer._prepare_inputs(batch)),
            context=trainer.compute_loss_context_manager, config={"training_args": args.to_dict()},
            precision=precision, grad_clip=args.max_grad_norm, framework="hf-trainer",
            max_incidents=self.max_incidents, replay=self.replay)
        self._wrap_training_step(trainer)
        if hasattr(trainer, "_get_grad_norm"):
            trainer._get_grad_norm = self._keep(trainer._get_grad_norm, "_grad_norm")
        for owner in (optimizer, lr_scheduler):
            if owner is not None:
                owner.step = self._gated(owner.step)

    def _wrap_training_step(self, trainer) -> None:
        original, guard = trainer.training_step, self.guard

        @functools.wraps(original)
        def training_step(model, inputs, *args, **kwargs):
            guard.begin(inputs)
            try:
                loss = original(model, inputs, *args, **kwargs)
            except Exception as err:
                if not guard.on_exception(err, step=trainer.state.global_step + 1):
                    raise
                self._discard = True
                import torch

                return torch.zeros((), device=trainer.args.device)
            guard.add_loss(loss)
            return loss

        trainer.training_step = training_step

    def _keep(self, fn, attr: str):
        @functools.wraps(fn)
        def kept(*args, **kwargs):
            value = fn(*args, **kwargs)
            setattr(self, attr, value)
            return value
        return kept

    def _gated(self, step):
        @functools.wraps(step)
        def gated(*args, **kwargs):
            if self._discard:
                return None
            return step(*args, **kwargs)
        return gated

    # ------------------------------------------------------------------------------ per step
    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self.guard is None:
            return
        if self._discard:  # an exception in this step was already recorded
            self.guard.reset_step()
        elif not self.guard.after_backward(None, grad_norm=self._grad_norm, step=state.global_step + 1):
            self._discard = True
        if self.guard.stopped:
            control.should_training_stop = True

    def on_step_end(self, args, state, control, **kwargs):
        self._discard, self._grad_norm = False, None


def _calling_trainer() -> Trainer | None:
    """The Trainer whose ``train()`` is calling this callback (callbacks are not handed it)."""
    frame = sys._getframe(1)
    for _ in range(12):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, Trainer):
            return owner
        frame = frame.f_back
    return None
