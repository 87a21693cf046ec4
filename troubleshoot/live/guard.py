"""``Guard``: the live guard for a plain PyTorch loop (the HF callback drives the same object).

    guard = Guard(model, optimizer, policy="skip")
    for batch in loader:
        with guard.watch(batch):                  # an exception in the step becomes an incident
            loss = model(**batch).loss
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if guard.after_backward(loss, grad_norm=norm):   # False: discard this update
                optimizer.step()
                scheduler.step()
            optimizer.zero_grad()
        if guard.stopped:
            break

Per step it costs one stacked read of a few scalars (one host sync; under torch.distributed one
all-reduce of a few flags before it): the loss, the grad norm (the loop's own when given, else one
fused norm), the supervised-token count and the loss scale. When ``StepJudge`` trips, the guard
writes an incident bundle, replays the step, diagnoses it and applies the policy:

    warn   log it and go on (the update is applied)
    skip   discard this update (gradients set to None, so even a stray ``optimizer.step()`` moves
           nothing) and go on: the OPT / PaLM practice for a bad batch
    stop   discard this update and set ``guard.stopped`` (the HF callback ends training cleanly)
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import signals
from .judge import StepJudge, StepValues

log = logging.getLogger("llmfix.live")
POLICIES = ("warn", "skip", "stop")


def default_loss(model, batch):
    """``model(**batch)`` for a dict batch, ``model(*batch)`` for a tuple; the loss is read off it."""
    return model(**batch) if isinstance(batch, dict) else model(*batch)


class Guard:
    """Watch every optimizer step of one run; see the module docstring for the loop."""

    def __init__(self, model, optimizer=None, *, policy: str = "warn", out_dir: str | Path = "llmfix-incidents",
                 scaler=None, loss_fn: Callable[[Any, Any], Any] | None = None,
                 context: Callable[[], Any] | None = None, config: dict | None = None,
                 precision: str | None = None, grad_clip: float | None = None, framework: str = "pytorch",
                 max_incidents: int = 5, replay: bool = True) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, not {policy!r}")
        self.model, self.optimizer, self.scaler = model, optimizer, scaler
        self.policy, self.out_dir = policy, Path(out_dir)
        self.loss_fn, self.context = loss_fn or default_loss, context
        self.config, self.framework, self.grad_clip = dict(config or {}), framework, grad_clip
        self.precision = precision or _precision(model, scaler)
        self.max_incidents, self.do_replay = max_incidents, replay
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.judge = StepJudge()
        self.step = 0
        self.stopped = False
        self.incidents: list[Path] = []
        self.diagnoses: list = []
        self._batches: list = []
        self._losses: list = []
        self._rng: dict | None = None
        self._previous: Any = None   # the last micro-batch of the previous step (a reference)

    # ------------------------------------------------------------------------------- the loop
    @contextlib.contextmanager
    def watch(self, batch: Any):
        """Around one step: remembers the batch and the RNG state (for the replay), and turns an
        exception raised inside into an incident (suppressed under skip / stop)."""
        self.begin(batch)
        try:
            yield self
        except Exception as err:
            if not self.on_exception(err):
                raise

    def begin(self, batch: Any) -> None:
        """Start of a micro-batch (``watch`` calls it): keep a reference, no copy."""
        from .replay import capture_rng

        if not self._batches:
            self._rng = capture_rng()
        self._batches.append(batch)

    def after_backward(self, loss: Any, batch: Any = None, grad_norm: Any = None, lr: float | None = None,
                       step: int | None = None) -> bool:
        """Judge the step; True when the optimizer should step, False to discard this update."""
        if batch is not None and not self._batches:
            self._batches.append(batch)
        if loss is not None:
            self.add_loss(loss)
        self.step = step if step is not None else self.step + 1
        try:
            return self._judge_step(grad_norm, lr)
        finally:
            self._previous = self._batches[-1] if self._batches else None
            self.reset_step()

    def add_loss(self, loss: Any) -> None:
        """The loss of one micro-batch (gradient accumulation calls it once per micro-batch)."""
        self._losses.append(loss)

    def on_exception(self, err: BaseException, batch: Any = None, step: int | None = None) -> bool:
        """An exception in the step: write the incident; True when the policy lets the run go on."""
        if batch is not None and not self._batches:
            self._batches.append(batch)
        self.step = step if step is not None else self.step + 1
        _, world = signals.rank_and_world()
        values = StepValues(self.step, float("nan"), lr=self._lr())
        self.judge.window.append(values.record())
        self._incident(["exception"], values, error=err, local_only=world > 1)
        self.reset_step()
        if self.policy == "warn" or world > 1:  # a lone rank cannot skip: its peers wait in a collective
            return False
        self._discard()
        return True

    def reset_step(self) -> None:
        """Forget this step's batches and losses (kept as references only until it is judged)."""
        self._batches, self._losses, self._rng = [], [], None

    # ---------------------------------------------------------------------------- judging
    def _judge_step(self, grad_norm: Any, lr: float | None) -> bool:
        loss = self._losses[0] if len(self._losses) == 1 else sum(x.detach() for x in self._losses)
        scale = self._scale()
        norm = grad_norm if grad_norm is not None else signals.grad_norm(self.params)
        if grad_norm is None and scale is not None and not self._unscaled():
            norm = norm / scale  # our norm read scaled gradients; the judge compares true norms
        count = signals.targets(self._batches)
        value, gn, targets, ls, flags = signals.read_step(loss, norm, count, scale)
        values = StepValues(self.step, value, gn, targets, ls, lr if lr is not None else self._lr(), flags)
        trips = self.judge.judge(values)
        if ls is not None:  # under a dynamic loss scaler inf/NaN gradients are its business
            trips = [t for t in trips if t != "nonfinite-grad"]
        if not trips:
            return True
        self._incident(trips, values)
        if self.policy == "warn":
            return True
        self._discard()
        return False

    def _discard(self) -> None:
        """Drop this update: gradients to None, so optimizers skip every parameter."""
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        for p in self.params:
            p.grad = None
        if self.policy == "stop":
            self.stopped = True

    # ---------------------------------------------------------------------------- incidents
    def _incident(self, trips: list[str], values: StepValues, error: BaseException | None = None,
                  local_only: bool = False) -> None:
        if len(self.incidents) >= self.max_incidents:
            log.warning("llmfix: step %s tripped (%s); no bundle (max_incidents=%s reached)",
                        self.step, ", ".join(trips), self.max_incidents)
            return
        from .incident import record_incident

        try:
            self.incidents.append(record_incident(self, trips, values, error, local_only))
        except Exception as err:  # the guard must never be what breaks the run
            log.warning("llmfix: step %s tripped (%s); the incident could not be recorded: %s: %s",
                        self.step, ", ".join(trips), type(err).__name__, err)

    # ---------------------------------------------------------------------------- state
    def _lr(self) -> float | None:
        if self.optimizer is None or not getattr(self.optimizer, "param_groups", None):
            return None
        lr = self.optimizer.param_groups[0].get("lr")
        return float(lr) if lr is not None else None

    def _scale(self):
        """The loss scale as the loop has it: GradScaler's tensor, DeepSpeed's float, else None."""
        scaler = self.scaler
        if scaler is not None and getattr(scaler, "is_enabled", lambda: True)():
            return getattr(scaler, "_scale", None)
        for owner in (self.optimizer, getattr(self.optimizer, "optimizer", None)):
            for attr in ("cur_scale", "loss_scale"):
                value = getattr(owner, attr, None)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    return value
        return None

    def _unscaled(self) -> bool:
        """Whether GradScaler.unscale_ already ran for this step (then .grad is unscaled)."""
        states = getattr(self.scaler, "_per_optimizer_states", None)
        state = states.get(id(self.optimizer)) if states and self.optimizer is not None else None
        return bool(state) and getattr(state.get("stage"), "name", "") == "UNSCALED"


def _precision(model, scaler) -> str | None:
    if scaler is not None and getattr(scaler, "is_enabled", lambda: True)():
        return "fp16"
    dtype = next((str(p.dtype) for p in model.parameters() if p.is_floating_point()), "")
    return {"torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float32": "fp32"}.get(dtype)
