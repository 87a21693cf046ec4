"""Replay the step that tripped: same weights, same batch, same RNG state, with forward hooks.

The guard judges a step after backward and before the optimizer step, so the weights are still
the ones the failing forward saw. ``replay`` runs that forward once more under the ``finite``
``ActivationMonitor`` of the model probes (one number per module call, one host sync), then
``torch.autograd.grad`` for the gradients — not ``.backward()``, so the loop's own ``.grad`` and
DDP's hooks are left untouched. What it tells:

- the first module whose output is NaN/Inf (hooks fire in post-order: the innermost producer),
  with the detailed frames before it (``frames_before``, only after a hit);
- whether the failure *replays* (deterministic: data, weights, numerics) or not (transient: the
  idea behind Megatron-LM's rerun state machine — a fault that does not come back on the same
  inputs points at the hardware);
- for an exception, where it was raised (the innermost module of the model on the traceback).

Cost: one forward and one backward, plus a partial forward for the frames after a hit.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..probes.forward import nonfinite as nf

SPIKE_REPLAY_REL = 0.05   # a replayed loss within 5 % of the live one reproduces the spike


@dataclass
class Replay:
    ran: bool = False
    why_not: str = ""
    loss: float | None = None
    first_module: str | None = None
    first_class: str | None = None
    frames: list[dict] = field(default_factory=list)
    grads_nonfinite: list[str] = field(default_factory=list)
    error: str | None = None          # "IndexError: index out of range in self"
    error_module: str | None = None
    reproduced: bool | None = None    # the trip came back
    previous_loss: float | None = None   # the previous step's batch on the current weights
    follows_weights: bool | None = None  # ... spikes too: the update, not the batch, is at fault

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


def replay(module, batch: Any, loss_fn: Callable[[Any, Any], Any], rng: dict | None,
           context: Callable[[], Any] | None = None, scale: float | None = None,
           backward: bool = True) -> Replay:
    """Run one forward (and backward) of ``loss_fn(module, batch)`` as the failing step did."""
    import torch

    out = Replay(ran=True)
    trainable = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    with _rng(rng), torch.enable_grad(), (context or contextlib.nullcontext)():
        try:
            with nf.ActivationMonitor(module, "finite") as mon:
                raw = loss_fn(module, batch)
        except Exception as err:  # the failing step raised: does the replay raise too?
            out.error = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200] if str(err).strip() else ''}"
            out.error_module = raising_module(module, err)
            return out
        loss = _as_loss(raw)
        results = mon.results()
        out.loss = float(loss.detach())
        hit = nf.first_nonfinite(results)
        if hit is not None:
            out.first_module = results[hit][0]
            with _rng(rng):
                out.frames = nf.frames_before(module, lambda: loss_fn(module, batch), hit)
            out.first_class = out.frames[-1]["class"] if out.frames else None
        if backward and loss.requires_grad and trainable:
            scaled = loss * scale if scale else loss
            grads = torch.autograd.grad(scaled, [p for _, p in trainable], allow_unused=True)
            out.grads_nonfinite = nonfinite_names([n for n, _ in trainable], grads)
    return out


def forward_loss(module, batch: Any, loss_fn: Callable[[Any, Any], Any], rng: dict | None,
                 context: Callable[[], Any] | None = None) -> float:
    """The loss of ``batch`` on the current weights, forward only (no graph kept)."""
    import torch

    with _rng(rng), torch.no_grad(), (context or contextlib.nullcontext)():
        return float(_as_loss(loss_fn(module, batch)).detach())


def follows_weights(prev_then: float, prev_now: float, live: float) -> bool:
    """The previous step's batch, fine when it ran, now rises at least half as much as the spike
    did: the last update moved the weights, the failing batch is not what is wrong."""
    return prev_now - prev_then >= 0.5 * (live - prev_then)


def nonfinite_names(names: list[str], tensors: list) -> list[str]:
    """Names whose tensor holds NaN/Inf: one fused norm per tensor, one host sync."""
    import torch

    kept = [(n, t) for n, t in zip(names, tensors) if t is not None]
    if not kept:
        return []
    norms = torch._foreach_norm([t.detach().float() if t.dtype != torch.float32 else t.detach() for _, t in kept])
    finite = torch.isfinite(torch.stack(norms)).tolist()
    return [n for (n, _), ok in zip(kept, finite) if not ok]


def judge_replay(rep: Replay, trips: list[str], live_loss: float) -> bool | None:
    """Did the trip come back? None when the replay could not tell (it did not run)."""
    if not rep.ran:
        return None
    if "exception" in trips:
        return rep.error is not None
    if rep.error is not None:
        return True  # the live step did not raise but the replay does: still not a one-off
    bad = rep.loss is None or not math.isfinite(rep.loss)
    if "nonfinite-loss" in trips or "nonfinite-grad" in trips:
        return bad or bool(rep.grads_nonfinite)
    if "loss-spike" in trips and math.isfinite(live_loss):
        return bad or abs(rep.loss - live_loss) <= SPIKE_REPLAY_REL * abs(live_loss)
    return None


def raising_module(model, err: BaseException) -> str | None:
    """The innermost module of ``model`` whose ``forward`` is on the exception's traceback."""
    names = {id(m): (n or "(model)") for n, m in model.named_modules()}
    found, tb = None, err.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if owner is not None and id(owner) in names:
            found = names[id(owner)]
        tb = tb.tb_next
    return found


def capture_rng() -> dict:
    """CPU (and current CUDA device) RNG state before a step, so a replay draws the same dropout."""
    import torch

    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


@contextlib.contextmanager
def _rng(state: dict | None):
    import torch

    if not state:
        yield
        return
    saved = capture_rng()
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"])
    try:
        yield
    finally:
        torch.set_rng_state(saved["cpu"])
        if "cuda" in saved:
            torch.cuda.set_rng_state(saved["cuda"])


def _as_loss(out: Any):
    """A loss tensor from what a forward returned: a tensor, ``.loss`` or the first item."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    loss = getattr(out, "loss", None)
    if loss is None and isinstance(out, dict):
        loss = out.get("loss")
    if loss is None and isinstance(out, (tuple, list)) and out:
        loss = out[0]
    if not isinstance(loss, torch.Tensor):
        raise TypeError("the replayed forward returned no loss tensor")
    return loss
