"""Trackers of the two values the training loop sets rather than measures: fp16 loss scale and LR.

Unlike loss and grad norm these are not noisy series to test for excursions: the loss scale moves
in halvings and doublings (each halving is an overflow, a skipped step) and the learning rate
follows a schedule, so each tracker keeps the few exact numbers the reading needs (reference
scale, worst collapse, skipped steps; peak LR and end of warmup) in O(1) memory. Thresholds are
explained in docs/log-analysis.md.
"""
from __future__ import annotations

import math
from collections import deque

LS_REF_RECORDS = 1000     # loss scale: reference = its maximum over this many records
LS_COLLAPSE_FACTOR = 16   # a fall of 16x (four halvings) below the reference is a collapse
LS_MIN_SCALE = 1.0        # a scale at or below this is pinned at the minimum: error


class LossScaleTracker:
    """fp16 dynamic loss scale: start-up calibration, reference level, collapses, skipped steps.

    Skipped steps at start-up (the scaler searching down from 2**16..2**32) are normal and kept
    apart; the first clean record ends that phase. Afterwards the reference is the largest scale
    of the last ``LS_REF_RECORDS`` records, so a scale that once peaked and now lives one step
    lower is not a collapse forever; a fall of ``LS_COLLAPSE_FACTOR`` below it is.
    Each halving of the logged scale counts as one skipped step when the log does not say more.
    """

    def __init__(self) -> None:
        self.calibrated_at: int | None = None
        self.startup_skips = 0
        self.skips = 0                 # after calibration, best estimate
        self.min = math.inf
        self.last: float | None = None
        self.drop_start: int | None = None   # first record below the reference, not back since
        self.drop_line = 0
        self.worst: tuple[float, int, int, float, int] | None = None  # factor, start, line, scale, at
        self.seen = False
        self._win: deque[tuple[int, float]] = deque()
        self._n = 0

    @property
    def ref(self) -> float:
        """The reference scale: the largest of the last LS_REF_RECORDS records (0 before any)."""
        return self._win[0][1] if self._win else 0.0

    def update(self, it: int, scale: float | None, skipped: int, line: int) -> None:
        """One training record: its logged scale (None: not logged) and the steps it skipped."""
        if scale is None or not math.isfinite(scale) or scale <= 0:
            if skipped:
                if self.calibrated_at is None:
                    self.startup_skips += skipped
                else:
                    self.skips += skipped
            return
        if scale == self.last and not skipped and self.calibrated_at is not None:
            self._n += 1  # unchanged scale: only the window position moves
            win = self._win
            win[-1] = (self._n, scale)
            if win[0][0] <= self._n - LS_REF_RECORDS:
                win.popleft()
            return
        if scale > LS_MIN_SCALE:
            self.seen = True  # bf16 Megatron prints 'loss scale: 1.0' throughout: no scaler at work
        if self.last is not None and scale < self.last:
            skipped = max(skipped, round(math.log2(self.last / scale)))
        self.last = scale
        if self.calibrated_at is None:
            if skipped:
                self.startup_skips += skipped
                return
            self.calibrated_at = it
        else:
            self.skips += skipped
        self.min = min(self.min, scale)
        self._n += 1
        while self._win and self._win[-1][1] <= scale:
            self._win.pop()
        self._win.append((self._n, scale))
        while self._win[0][0] <= self._n - LS_REF_RECORDS:
            self._win.popleft()
        if scale >= self.ref:
            self.drop_start = None
            return
        if self.drop_start is None:
            self.drop_start, self.drop_line = it, line
        factor = self.ref / scale
        if self.worst is None or factor > self.worst[0]:
            self.worst = (factor, self.drop_start, self.drop_line, scale, it)

    def factor_now(self) -> float:
        """How far the last scale is below the reference (1.0: not below)."""
        return self.ref / self.last if self.last and self.ref else 1.0


class LRTracker:
    """Peak learning rate and the end of warmup, from the logged LR (exact, not from blocks)."""

    REL_TOL = 1e-4  # Megatron prints 4 significant digits

    def __init__(self) -> None:
        self.first: float | None = None
        self.peak = 0.0
        self.peak_it: int | None = None
        self.peak_line = 0
        self.rises = 0            # records where the LR went up before the peak
        self.prev: float | None = None
        self.prev_it: int | None = None
        self.rise_from: int | None = None   # the record before the peak was reached
        self.fell_after_peak = False
        self.last_it: int | None = None

    def update(self, it: int, lr: float | None, line: int) -> None:
        """One logged LR; an unchanged value only moves the last iteration."""
        if lr == self.prev:
            self.prev_it = self.last_it = it
            return
        if lr is None or not math.isfinite(lr):
            return
        if self.first is None:
            self.first = lr
        if lr > self.peak * (1 + self.REL_TOL):
            if self.prev is not None and lr > self.prev:
                self.rises += 1
            self.peak, self.peak_it, self.peak_line = lr, it, line
            self.rise_from, self.fell_after_peak = self.prev_it, False
        elif lr < self.peak * (1 - self.REL_TOL):
            self.fell_after_peak = True
        self.prev, self.prev_it, self.last_it = lr, it, it

    @property
    def warmup_end(self) -> int | None:
        """Iteration where the LR first reached its peak, when a rise to it was logged and the
        LR did not rise again afterwards (None: no warmup in the log, or still warming up)."""
        if self.peak_it is None or self.rises < 1 or self.first is None or self.first >= self.peak:
            return None
        if self.peak_it == self.last_it and not self.fell_after_peak:
            return None  # the LR was still rising when the log ends
        return self.peak_it

    @property
    def still_warming(self) -> bool:
        """The LR rose more than once and was still at its peak when the log ended."""
        return self.rises >= 2 and self.peak_it == self.last_it

