"""Robust statistics of the log probe, and the whole run kept as a bounded list of block summaries.

The robust scale used everywhere is the median absolute *successive difference*:
sigma = 1.0484 * median(|x[i] - x[i-1]|) estimates the noise of x without being inflated by a
trend (a falling loss curve), unlike a plain standard deviation.

``Blocks`` is what survives of a log of any length: at most ``MAX_BLOCKS`` summaries (pairs merge
when the cap is hit), read by the slow-trend checks (``trends``), the terminal timeline and
the plot. Thresholds are explained in docs/log-analysis.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

MIN_NOISE_POINTS = 8      # fewer differences: sigma unknown, only the relative floor applies
SIGMA_PER_ABS_DIFF = 1.0484  # 1 / (0.6745 * sqrt(2)): median |diff| of N(0, s^2) noise -> s
MAX_BLOCKS = 2048         # block summaries kept for trends, timeline and plot


def median(values) -> float:
    """The median of a non-empty iterable (the mean of the middle two for an even count)."""
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def robust_sigma(diffs) -> float | None:
    """Noise scale from successive differences; None when there are too few of them."""
    if len(diffs) < MIN_NOISE_POINTS:
        return None
    return SIGMA_PER_ABS_DIFF * median(map(abs, diffs))


@dataclass
class Blocks:
    """The whole run as at most MAX_BLOCKS block summaries (median loss, median grad norm, loss-
    scale range, last LR, time per sample). Blocks start one record wide and merge pairwise."""

    size: int = 1
    it: list = field(default_factory=list)        # last iteration in the block
    loss: list = field(default_factory=list)      # median (merged: mean of medians)
    loss_lo: list = field(default_factory=list)
    loss_hi: list = field(default_factory=list)
    gn: list = field(default_factory=list)        # median grad norm (merged: geometric mean)
    ls: list = field(default_factory=list)        # minimum loss scale in the block
    ls_hi: list = field(default_factory=list)
    lr: list = field(default_factory=list)
    tps: list = field(default_factory=list)       # seconds per sample (or per iteration)
    _cur: list = field(default_factory=list)

    def add(self, it: int, loss: float | None, gn: float | None, ls: float | None,
            lr: float | None, tps: float | None) -> None:
        """One record; every value finite (and gn, ls > 0) or None."""
        cur = self._cur
        cur.append((it, loss, gn, ls, lr, tps))
        if len(cur) >= self.size:
            self._flush()

    def _flush(self) -> None:
        cur, self._cur = self._cur, []
        if not cur:
            return
        its, loss, gn, ls, lr, tps = zip(*cur)
        nan = math.nan
        losses = [x for x in loss if x is not None]
        gns = [x for x in gn if x is not None]
        lss = [x for x in ls if x is not None]
        lrs = [x for x in lr if x is not None]
        tpss = [x for x in tps if x is not None]
        self.it.append(its[-1])
        self.loss.append(median(losses) if losses else nan)
        self.loss_lo.append(min(losses) if losses else nan)
        self.loss_hi.append(max(losses) if losses else nan)
        self.gn.append(median(gns) if gns else nan)
        self.ls.append(min(lss) if lss else nan)
        self.ls_hi.append(max(lss) if lss else nan)
        self.lr.append(lrs[-1] if lrs else nan)
        self.tps.append(median(tpss) if tpss else nan)
        if len(self.it) >= MAX_BLOCKS:
            self._halve()

    def _halve(self) -> None:
        """Merge neighbouring blocks pairwise; a NaN half gives way to the other half."""
        def pair(xs, how):
            out = []
            for i in range(0, len(xs) - 1, 2):
                a, b = xs[i], xs[i + 1]
                out.append(b if a != a else a if b != b else how(a, b))
            if len(xs) % 2:
                out.append(xs[-1])
            return out
        mean = lambda a, b: (a + b) / 2  # noqa: E731
        self.it = pair(self.it, lambda a, b: b)
        self.loss, self.tps = pair(self.loss, mean), pair(self.tps, mean)
        self.loss_lo, self.loss_hi = pair(self.loss_lo, min), pair(self.loss_hi, max)
        self.gn = pair(self.gn, lambda a, b: math.sqrt(a * b))
        self.ls, self.ls_hi = pair(self.ls, min), pair(self.ls_hi, max)
        self.lr = pair(self.lr, lambda a, b: b)
        self.size *= 2

    def finish(self) -> None:
        """Flush the last, partly filled block."""
        self._flush()
