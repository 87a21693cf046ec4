"""Judge one training step from the few numbers the loop already has (pure Python, no torch).

``StepJudge.judge(values)`` returns the reasons this step is an incident, best first:

    nonfinite-loss       the loss is NaN/Inf (on some rank)
    nonfinite-grad       the gradient norm is NaN/Inf (on some rank)
    no-target            a micro-batch has no supervised token (labels all -100, loss_mask all 0)
    loss-spike           the loss jumped far above its rolling median
    grad-explosion       the gradient norm jumped far above its rolling median (log space)
    loss-scale-collapse  the fp16 loss scale is pinned at 1, or fell 16x below its recent maximum
    exception            the forward/backward raised (set by the guard, not judged here)

Spikes and explosions are judged by the log probe's own ``SpikeDetector`` (one implementation, the
thresholds of docs/log-analysis.md), fed one record per step; the loss-scale thresholds are the log
probe's too. A detector only judges once it has seen ``WARMUP_STEPS`` finite values, so the
first steps of a run, when losses fall fast and gradients are large, do not trip it.
The judge also keeps the recent metrics window that goes into an incident bundle as JSONL.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from ..probes.logs.detectors import LEVEL_WINDOW, SpikeDetector  # the log probe's own detectors
from ..probes.logs.trackers import LS_COLLAPSE_FACTOR, LS_MIN_SCALE, LS_REF_RECORDS

WARMUP_STEPS = 2 * LEVEL_WINDOW   # finite values a detector sees before it may trip
WINDOW = 64                        # steps of metrics kept for the bundle
LR_JUMP = 10.0                     # the LR of an update this many times the window's median LR is a jump


@dataclass
class StepValues:
    """What one step measured, already agreed between ranks (identical on every rank)."""

    step: int
    loss: float
    grad_norm: float | None = None
    targets: float | None = None        # supervised tokens of the emptiest micro-batch / rank
    loss_scale: float | None = None
    lr: float | None = None
    rank_flags: list[int] = field(default_factory=list)  # per rank: 1 loss, 2 grad non-finite, 4 no target

    def record(self) -> dict:
        """One line of metrics.jsonl, in keys the log loader reads (non-finite values as text)."""
        out = {"step": self.step}
        for key in RECORD_KEYS:
            v = getattr(self, key)
            if v is not None:
                out[key] = v if math.isfinite(v) else str(v)
        return out


LOSS, GRAD, TARGET = 1, 2, 4
RECORD_KEYS = ("loss", "grad_norm", "targets", "loss_scale", "lr")


class StepJudge:
    """Online detectors over the steps of one run; ``judge`` is called once per optimizer step."""

    def __init__(self, window: int = WINDOW) -> None:
        self.loss = SpikeDetector("spike")
        self.grad = SpikeDetector("explosion", log_space=True)
        self.seen = {"loss": 0, "grad": 0}
        self.window: deque[dict] = deque(maxlen=window)
        self.scale_max: deque[float] = deque(maxlen=LS_REF_RECORDS)
        self.lrs: deque[float] = deque(maxlen=window)
        self.lr_peak = 0.0
        self.in_collapse = False

    def judge(self, v: StepValues) -> list[str]:
        self.window.append(v.record())
        trips = []
        flags = v.rank_flags or [(LOSS if not _finite(v.loss) else 0)
                                 | (GRAD if v.grad_norm is not None and not _finite(v.grad_norm) else 0)
                                 | (TARGET if v.targets == 0 else 0)]
        if any(f & LOSS for f in flags) or not _finite(v.loss):
            trips.append("nonfinite-loss")
        if any(f & GRAD for f in flags) or (v.grad_norm is not None and not _finite(v.grad_norm)):
            trips.append("nonfinite-grad")
        if any(f & TARGET for f in flags):
            trips.append("no-target")
        if self._excursion(self.loss, "loss", v.step, v.loss):
            trips.append("loss-spike")
        if v.grad_norm is not None and self._excursion(self.grad, "grad", v.step, v.grad_norm):
            trips.append("grad-explosion")
        if v.loss_scale is not None and self._scale_collapsed(v.loss_scale):
            trips.append("loss-scale-collapse")
        if v.lr is not None:
            self.lrs.append(v.lr)
            self.lr_peak = max(self.lr_peak, v.lr)
        return trips

    def _excursion(self, det: SpikeDetector, key: str, step: int, value: float) -> bool:
        if not _finite(value):
            return False
        opened = det.update(step, value, step)
        self.seen[key] += 1
        return opened is not None and self.seen[key] > WARMUP_STEPS

    def _scale_collapsed(self, scale: float) -> bool:
        """True on the step the scale enters collapse (not on every step it stays there)."""
        self.scale_max.append(scale)
        collapsed = scale <= LS_MIN_SCALE or max(self.scale_max) >= LS_COLLAPSE_FACTOR * scale
        entered, self.in_collapse = collapsed and not self.in_collapse, collapsed
        return entered

    def lr_level(self) -> float | None:
        """The median LR of the window: the run's LR, whatever one step did."""
        lrs = sorted(self.lrs)
        return lrs[len(lrs) // 2] if lrs else None

    def lr_jump(self) -> bool | None:
        """Whether the update that made the current weights (the previous step's) used an LR
        ``LR_JUMP`` times the median of the steps before it; None while too few are known."""
        lrs = list(self.lrs)[:-1]  # the last entry is this step's LR, not applied yet
        if len(lrs) < LEVEL_WINDOW:
            return None
        before = sorted(lrs[:-1])
        median = before[len(before) // 2]
        return median > 0 and lrs[-1] >= LR_JUMP * median


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
