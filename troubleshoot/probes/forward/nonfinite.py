"""Where does the first NaN/Inf appear, and how close do activations get to the fp16 limit?

A helper of ``gradflow`` (not a probe family of its own). Two steps, as in Hugging Face's
``DebugUnderflowOverflow`` but cheaper on the pass that usually finds nothing:

1. ``ActivationMonitor``: a forward hook on every module records ONE number per call, kept on
   the device: no host sync per module, one ``torch.stack(...).cpu()`` at the end. In ``finite``
   mode the number is a sum of the output (NaN/Inf propagate; the cheapest full read; fp16
   outputs use abs-max instead, since their sum could overflow); in ``absmax`` mode it is the
   abs-max (``torch.aminmax``), which also says how close an fp32 pass gets to the fp16 limit.
   An output that is the very tensor measured just before (dropout in eval mode, the model's
   logits after the head's) is not read twice. Hooks fire in post-order, so the first non-finite
   call is the innermost module that produced it.
2. ``frames_before``: only after a hit, re-run the forward with detailed statistics (input, output
   and weight abs-max) for the few module calls up to the hit, and stop there.

Sample of what gradflow turns this into::

    error  forward.first_nonfinite_module  first NaN/Inf output: blocks.1.mlp.fc1 (Linear);
           its weight holds NaN/Inf; input abs-max 3.1, output abs-max nan
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

FP16_MAX = 65504.0    # largest finite float16
FP16_DANGER = 1e4     # heuristic: products of two such values overflow fp16 (KNOWLEDGE amp_fp16_overflow)
FRAMES = 5            # module calls shown before the first non-finite one


def float_tensors(obj: Any, depth: int = 0) -> list:
    """Floating tensors in a module's output (tensor, tuple/list, dict, ModelOutput)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj] if obj.is_floating_point() and obj.numel() else []
    if depth > 2:
        return []
    if isinstance(obj, dict):
        obj = list(obj.values())
    elif hasattr(obj, "to_tuple"):
        obj = obj.to_tuple()
    if isinstance(obj, (tuple, list)):
        return [t for item in obj for t in float_tensors(item, depth + 1)]
    return []


def absmax(tensors: list):
    """One 0-dim fp32 tensor: the largest |x| over ``tensors``; NaN if any holds NaN. No sync."""
    import torch

    best = None
    for t in tensors:
        lo, hi = torch.aminmax(t.detach())
        m = torch.maximum(hi, lo.neg())
        m = m if m.dtype == torch.float32 else m.float()
        best = m if best is None else torch.maximum(best, m)
    return best


def finite_sum(tensors: list):
    """One 0-dim fp32 tensor, non-finite iff some element is (fp16: its abs-max). No sync.

    A sum of finite values stays finite in fp32/bf16 range; NaN, +Inf and -Inf survive it
    (Inf + -Inf gives NaN). fp16 sums could overflow on their own, so fp16 uses the abs-max.
    """
    import torch

    total = None
    for t in tensors:
        m = absmax([t]) if t.dtype == torch.float16 else t.detach().sum()
        m = m if m.dtype == torch.float32 else m.float()
        total = m if total is None else total + m
    return total


class ActivationMonitor:
    """Context manager: ``with ActivationMonitor(model) as mon: model(x)``; then ``mon.results()``.

    ``mode="absmax"`` records each call's output abs-max; ``mode="finite"`` only a number that is
    non-finite exactly when the output is (cheaper; its value means nothing else).
    """

    def __init__(self, model, mode: str = "absmax") -> None:
        self.names = {m: (n or "(model)") for n, m in model.named_modules()}
        self.reduce = absmax if mode == "absmax" else finite_sum
        self.combine = torch_maximum if mode == "absmax" else (lambda a, b: a + b)
        self.calls: list[str] = []
        self.values: list = []
        self.handles: list = []
        self.recent: list = []  # (tensor, value) of the last outputs: same tensor is read once

    def _measure(self, t):
        for seen, value in self.recent:
            if seen is t:
                return value
        value = self.reduce([t])
        self.recent = [(t, value)] + self.recent[:3]
        return value

    def _hook(self, module, args, out) -> None:
        tensors = float_tensors(out)
        if not tensors:
            return
        m = self._measure(tensors[0])
        for t in tensors[1:]:
            m = self.combine(m, self._measure(t))
        self.calls.append(self.names.get(module, type(module).__name__))
        self.values.append(m)

    def __enter__(self) -> "ActivationMonitor":
        self.handles = [m.register_forward_hook(self._hook) for m in self.names]
        return self

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()
        self.handles, self.recent = [], []

    def results(self) -> list[tuple[str, float]]:
        """(module name, output abs-max) per call, in execution order (one host sync)."""
        import torch

        if not self.values:
            return []
        return list(zip(self.calls, torch.stack(self.values).cpu().tolist()))


def torch_maximum(a, b):
    import torch

    return torch.maximum(a, b)


def first_nonfinite(results: list[tuple[str, float]]) -> int | None:
    """Index of the first call whose output abs-max is NaN or Inf."""
    return next((i for i, (_, v) in enumerate(results) if not math.isfinite(v)), None)


@dataclass
class Overflow:
    """What an fp32 pass says about running the same model in fp16."""

    absmax: float
    top: list[tuple[str, float]]        # largest modules first
    first_over: str | None              # first module in execution order at or above FP16_MAX
    first_danger: str | None            # ... at or above FP16_DANGER

    @property
    def risk(self) -> bool:
        return self.first_danger is not None


def overflow(results: list[tuple[str, float]], top: int = 3) -> Overflow:
    finite = [(n, v) for n, v in results if math.isfinite(v)]
    best: dict[str, float] = {}
    for n, v in finite:
        best[n] = max(best.get(n, 0.0), v)
    ranked = sorted(best.items(), key=lambda kv: -kv[1])[:top]
    return Overflow(absmax=max((v for _, v in finite), default=0.0), top=ranked,
                    first_over=next((n for n, v in finite if v >= FP16_MAX), None),
                    first_danger=next((n for n, v in finite if v >= FP16_DANGER), None))


class _Stop(Exception):
    """Raised from a hook to end the detailed re-run right after the hit."""


def frames_before(model, forward: Callable[[], Any], hit: int, frames: int = FRAMES) -> list[dict]:
    """Re-run ``forward()`` recording detailed stats for calls hit-frames+1 .. hit, then stop.

    Each frame: module name and class, input/output abs-max, weight abs-max and whether the
    module's own parameters hold NaN/Inf (a NaN weight is where a NaN forward usually starts).
    """
    import torch

    names = {m: (n or "(model)") for n, m in model.named_modules()}
    kept: list[dict] = []
    count = [0]

    def hook(module, args, out) -> None:
        outs = float_tensors(out)
        if not outs:
            return
        i = count[0]
        count[0] += 1
        if i < hit - frames + 1:
            return
        params = [p.detach() for p in module.parameters(recurse=False) if p.is_floating_point()]
        stat = lambda ts: _num(absmax(ts)) if ts else None  # noqa: E731
        kept.append({"module": names.get(module, "?"), "class": type(module).__name__,
                     "input_absmax": stat(float_tensors(list(args))),
                     "output_absmax": stat(outs), "weight_absmax": stat(params),
                     "weight_nonfinite": any(not bool(torch.isfinite(p).all()) for p in params)})
        if i >= hit:
            raise _Stop

    handles = [m.register_forward_hook(hook) for m in names]
    try:
        with torch.no_grad():
            forward()
    except _Stop:
        pass
    finally:
        for h in handles:
            h.remove()
    return kept[-frames:]


def _num(t) -> float | None:
    return None if t is None else float(t)
