"""Noise-robust detectors over a stream of log records, with memory bounded whatever the log size.

Everything is online: a detector sees each record once and keeps fixed-size windows
(``LEVEL_WINDOW`` / ``NOISE_WINDOW`` / ``LOOKBACK``); the whole run survives only as at most
``MAX_BLOCKS`` block summaries (pairs of blocks merge when the cap is hit), which is what the
slow-trend checks, the terminal timeline and the plot read. Thresholds are named constants here
and explained, with the reasoning behind each number, in docs/log-analysis.md.

The robust scale used everywhere is the median absolute *successive difference*:
sigma = 1.0484 * median(|x[i] - x[i-1]|) estimates the noise of x without being inflated by a
trend (a falling loss curve), unlike a plain standard deviation.
"""
from __future__ import annotations

import math
import re
from collections import Counter, deque
from dataclasses import dataclass, field
from math import inf as INF, isfinite
from pathlib import Path

from ..errors import ArtifactError
from ..loaders.logs import Record, detect_format, iter_records

LEVEL_WINDOW = 8          # records whose median is the level a new value is compared with
NOISE_WINDOW = 32         # successive differences behind the noise estimate sigma
MIN_NOISE_POINTS = 8      # fewer differences: sigma unknown, only the relative floor applies
LOOKBACK = 32             # records kept to locate where a rise began
REFRESH_RECORDS = 8       # level / sigma / threshold recomputed every 8 ordinary records
SPIKE_Z = 6.0             # loss spike: value > level + max(SPIKE_Z * sigma, SPIKE_REL * level)
SPIKE_REL = 0.10
RECOVER_Z = 3.0           # recovered: value <= level + max(RECOVER_Z * sigma, RECOVER_REL * level)
RECOVER_REL = 0.05
ONSET_Z = 2.0             # a record belongs to the rise when above its level by ONSET_Z sigma
ONSET_REL = 0.02          # ... and by ONSET_REL of the level
SPIKE_RISE_RECORDS = 3    # a rise that took this many records to cross the threshold is a climb
SPIKE_EARLY_RECORDS = 5   # ... and so is one that reached less than SPIKE_EARLY_FRACTION of its
SPIKE_EARLY_FRACTION = 0.5  # peak excess within its first 5 records: divergence, not a spike
SETTLE_RECORDS = 100      # an event open this long whose level stopped falling (by SETTLE_FALL
SETTLE_FALL = 0.01        # over the last SETTLE_RECORDS / 2 records) "did not recover"; one
SETTLE_MAX_RECORDS = 5000  # still falling after SETTLE_MAX_RECORDS records is closed anyway
BLIP_RECORDS = 3          # single-batch values back at their level within 3 records: a blip
GN_FACTOR = 2.0           # grad-norm explosion: > GN_FACTOR x its level (and > GN_Z sigma in log)
GN_Z = 6.0
GN_RECOVER_FACTOR = 1.5
GN_ONSET_FACTOR = 1.25
LS_REF_RECORDS = 1000     # loss scale: reference = its maximum over this many records
LS_COLLAPSE_FACTOR = 16   # a fall of 16x (four halvings) below the reference is a collapse
LS_MIN_SCALE = 1.0        # a scale at or below this is pinned at the minimum: error
SKIP_WARN_FRACTION = 0.05  # skipped iterations after start-up / logged iterations: warning
SKIP_ERROR_FRACTION = 0.25  # ... error
EARLY_LS_FACTOR = 4.0     # early warning: loss scale >= 4x below its reference when the loss
EARLY_MIN_RECORDS = 5     # spike begins, and falling since >= 5 logged records before it
MAX_EVENTS = 200          # events kept per detector (later ones are only counted)
MAX_BLOCKS = 2048         # block summaries kept for trends, timeline and plot
SIGMA_PER_ABS_DIFF = 1.0484  # 1 / (0.6745 * sqrt(2)): median |diff| of N(0, s^2) noise -> s


def median(values) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def robust_sigma(diffs) -> float | None:
    """Noise scale from successive differences; None when there are too few of them."""
    if len(diffs) < MIN_NOISE_POINTS:
        return None
    return SIGMA_PER_ABS_DIFF * median(map(abs, diffs))


@dataclass
class Event:
    """One excursion of a series above its level (loss spike / divergence, grad-norm explosion)."""

    kind: str                 # spike | divergence | explosion
    start: int                # first iteration above the threshold
    line: int                 # its line in the log
    onset: int                # where the rise began (<= start)
    onset_prev: int | None    # the last iteration logged before the onset (rollback bound)
    level: float              # the level before the event (original units)
    peak_it: int
    peak: float
    end: int | None = None    # iteration where the series came back to its level
    recovered: bool = False
    settled: float | None = None   # level it stayed at when it did not recover
    last: float | None = None      # last value seen while open
    records: int = 0
    across_gap: bool = False
    ls_drop_start: int | None = None   # loss scale had been falling since (early warning)
    ls_drop_factor: float = 1.0
    segment: int = 0          # how many restarts of the log came before it
    rise: int = 0             # records from the onset to the first one above the threshold
    early: float = 0.0        # highest value in the first SPIKE_EARLY_RECORDS records from the onset

    @property
    def ratio(self) -> float:
        return self.peak / self.level if self.level else math.inf


class SpikeDetector:
    """Rolling-median / robust-sigma excursion detector for one series.

    ``log_space`` compares log(value) (grad norms are multiplicative); the floor is then
    ``log(factor)`` instead of ``rel * level``.
    """

    def __init__(self, kind: str, log_space: bool = False) -> None:
        self.kind, self.log = kind, log_space
        self.recent: deque[float] = deque(maxlen=LEVEL_WINDOW)
        self.diffs: deque[float] = deque(maxlen=NOISE_WINDOW)
        self.hist: deque[tuple[int, float, float | None, bool]] = deque(maxlen=LOOKBACK)
        self.sigma: float | None = None
        self._stale = 0
        self._thr: float | None = None    # cached spike threshold (None: take the exact path)
        self._n_refresh = 0
        self._check: float | None = None  # median of the tail at the last settle check
        self._level: float | None = None
        self.open: Event | None = None
        self._frozen: tuple[float, float | None] = (0.0, None)
        self._tail: deque[float] = deque(maxlen=LEVEL_WINDOW)
        self.events: list[Event] = []
        self.dropped = 0
        self.since_close = 10 ** 9
        self.segment = 0
        self.prev_it: int | None = None

    # thresholds in transformed space ------------------------------------------------------
    def _x(self, v: float) -> float:
        return math.log(v) if self.log else v

    def _v(self, x: float) -> float:
        return math.exp(x) if self.log else x

    def _margin(self, level: float, sigma: float | None, z: float, rel: float, factor: float) -> float:
        floor = math.log(factor) if self.log else rel * abs(level)
        return max(z * sigma, floor) if sigma is not None else floor

    def update(self, it: int, value: float, line: int, gap: bool = False) -> Event | None:
        """Feed one finite value; returns the event when one opens at this record."""
        if self.log:
            if value <= 0:
                return None
            x = math.log(value)
        else:
            x = value
        thr = self._thr
        if thr is not None and x <= thr and self.open is None and not gap:
            # the common case, kept cheap: an ordinary record joins the baseline
            recent = self.recent
            self.diffs.append(x - recent[-1])
            recent.append(x)
            self.hist.append((it, x, self._level, False))
            self.prev_it = it
            self.since_close += 1
            self._stale += 1
            if self._stale >= REFRESH_RECORDS:
                self._refresh()
            return None
        opened = None
        level = median(self.recent) if self.recent else None
        if self.open is None:
            if level is not None and x > level + self._margin(level, self.sigma, SPIKE_Z, SPIKE_REL, GN_FACTOR):
                opened = self._open(it, x, line, level, gap)
            else:
                self._baseline(x)
                self.since_close += 1
        else:
            self._advance(it, x)
        self.hist.append((it, x, level, gap))
        self.prev_it = it
        self._refresh()
        return opened

    def _refresh(self) -> None:
        """Recompute level, noise and threshold; until the level window is full every record
        takes the exact path, afterwards the threshold is refreshed every REFRESH_RECORDS (the
        noise every fourth time: it changes slowly)."""
        self._stale = 0
        self._n_refresh += 1
        if self.sigma is None or self._n_refresh % 4 == 0 or len(self.diffs) < NOISE_WINDOW:
            self.sigma = robust_sigma(self.diffs)
        if len(self.recent) < LEVEL_WINDOW or self.open is not None:
            self._thr = None
            return
        level = self._level = median(self.recent)
        self._thr = level + self._margin(level, self.sigma, SPIKE_Z, SPIKE_REL, GN_FACTOR)

    def _baseline(self, x: float) -> None:
        if self.recent:
            self.diffs.append(x - self.recent[-1])
        self.recent.append(x)

    def _open(self, it: int, x: float, line: int, level: float, gap: bool) -> Event:
        margin = self._margin(level, self.sigma, ONSET_Z, ONSET_REL, GN_ONSET_FACTOR)
        onset, onset_prev, rise, across = it, self.prev_it, 0, gap
        for h_it, h_x, h_level, h_gap in reversed(self.hist):  # walk back through the rise
            base = level if h_level is None else min(level, h_level)
            if h_level is None or h_x <= base + margin:
                onset_prev = h_it
                break
            onset, rise, onset_prev = h_it, rise + 1, None
            if h_gap:
                across = True
                break
        kind = self.kind
        if kind == "spike" and (rise >= SPIKE_RISE_RECORDS or gap):
            kind = "divergence"
        ev = Event(kind, it, line, onset, onset_prev, self._v(level), it, self._v(x), across_gap=across,
                   segment=self.segment, rise=rise, early=self._v(x))
        self._frozen = (level, self.sigma)
        ev.last, ev.records = self._v(x), ev.records + 1
        self._tail.clear()
        self._tail.append(x)
        self._check = None
        self.open = ev
        return ev

    def _advance(self, it: int, x: float) -> None:
        ev = self.open
        level, sigma = self._frozen
        ev.records += 1
        ev.last = self._v(x)
        self._tail.append(x)
        if x > self._x(ev.peak):
            ev.peak_it, ev.peak = it, self._v(x)
            if ev.rise + ev.records <= SPIKE_EARLY_RECORDS:
                ev.early = ev.peak
        if x <= level + self._margin(level, sigma, RECOVER_Z, RECOVER_REL, GN_RECOVER_FACTOR):
            ev.recovered, ev.end = True, it
            self._close()
            self._baseline(x)
        elif ev.records >= SETTLE_RECORDS and ev.records % (SETTLE_RECORDS // 2) == 0:
            now = median(self._tail)
            falling = self._check is not None and now < self._check - abs(self._check) * SETTLE_FALL
            if falling and ev.records < SETTLE_MAX_RECORDS:
                self._check = now  # still coming down: keep following the recovery
                return
            ev.settled = self._v(now)
            self._close()
            self.recent.clear()  # the series lives at a new level now
            for t in self._tail:
                self._baseline(t)
        elif ev.records == SETTLE_RECORDS // 2:
            self._check = median(self._tail)

    def _close(self) -> None:
        ev = self.open
        if ev.kind == "spike" and ev.early - ev.level < SPIKE_EARLY_FRACTION * (ev.peak - ev.level):
            ev.kind = "divergence"  # most of the rise came later: a climb, not a jump
        if len(self.events) < MAX_EVENTS:
            self.events.append(self.open)
        else:
            self.dropped += 1
        self.open, self.since_close = None, 0

    def finish(self) -> None:
        """Close an event still open at the end of the log (it did not recover)."""
        if self.open is not None:
            if self._tail:
                self.open.settled = self._v(median(self._tail))
            self._close()

    def rebase(self) -> None:
        """After a gap in the log: start a fresh baseline unless an event is being followed."""
        if self.open is None:
            self.recent.clear()
            self.diffs.clear()
            self.hist.clear()
            self.sigma = self._thr = None

    def restart(self) -> None:
        """The log resumed from an earlier iteration: forget the windows, keep the events."""
        self.finish()
        self.recent.clear()
        self.diffs.clear()
        self.hist.clear()
        self.prev_it = self._thr = None
        self.segment += 1


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
        return self._win[0][1] if self._win else 0.0

    def update(self, it: int, scale: float | None, skipped: int, line: int) -> None:
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
        return self.rises >= 2 and self.peak_it == self.last_it


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
        self._flush()


# ---------------------------------------------------------------------------------------------
# slow trends, read from the block summaries after the stream ended

DRIFT_REL = 0.10          # divergence: smoothed loss ends >= 10 % above its minimum ...
DRIFT_Z = 4.0             # ... and >= 4 sigma (block-level noise) above it ...
DRIFT_MIN_RECORDS = 20    # ... over at least this many records after the minimum
PLATEAU_MIN_RECORDS = 200  # plateau: only judged on runs with this many records ...
PLATEAU_FRACTION = 0.25   # ... when the last 25 % of the iterations ...
PLATEAU_REL = 0.01        # ... improved the best smoothed loss by less than 1 %
GN_TREND_FACTOR = 2.0     # early warning: grad-norm level before the event >= 2x its minimum
GN_TREND_START_NEAR = 1.25  # ... the trend started where it was last within 1.25x of that minimum
GN_TREND_WINDOW = 0.5     # ... looking back over the last half of the history before the onset
EVAL_RISE_REL = 0.02      # validation loss rising (3-point medians): the last >= 2 % and
EVAL_RISE_Z = 3.0         # >= 3 sigma (noise of the evals) above the best,
EVAL_MIN_AFTER = 2        # with at least 2 evals after the best one
SLOWDOWN_FACTOR = 1.5     # time per sample in the last 10 % of the run >= 1.5x the run's median
SLOWDOWN_MIN_RECORDS = 40


def _smooth3(xs: list[float]) -> list[float]:
    return [median(xs[max(0, i - 1):i + 2]) for i in range(len(xs))]


def _finite(its, xs) -> tuple[list[int], list[float]]:
    pairs = [(i, x) for i, x in zip(its, xs) if x == x and math.isfinite(x)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


@dataclass
class Drift:
    onset: int        # the first block after the minimum of the smoothed loss
    minimum: float
    min_it: int
    final: float


def drift(blocks: Blocks) -> Drift | None:
    """Slow divergence: the smoothed loss climbs well above its minimum and stays there."""
    its, xs = _finite(blocks.it, blocks.loss)
    if len(xs) < 4:
        return None
    s = _smooth3(xs)
    i_min = min(range(len(s)), key=s.__getitem__)
    m = s[i_min]
    final = median(s[-max(1, len(s) // 20):])
    sigma = robust_sigma([b - a for a, b in zip(s, s[1:])]) or 0.0
    if (final < m + abs(m) * DRIFT_REL or final - m < DRIFT_Z * sigma
            or (len(s) - 1 - i_min) * blocks.size < DRIFT_MIN_RECORDS):
        return None
    return Drift(its[min(i_min + 1, len(its) - 1)], m, its[i_min], final)


def plateau(blocks: Blocks, records: int) -> tuple[int, float] | None:
    """(start iteration, level) when the best smoothed loss stopped improving for a long stretch."""
    its, xs = _finite(blocks.it, blocks.loss)
    if records < PLATEAU_MIN_RECORDS or len(xs) < 8:
        return None
    s = _smooth3(xs)
    best, bests = math.inf, []
    for x in s:
        best = min(best, x)
        bests.append(best)
    final = bests[-1]
    k0 = next(k for k, b in enumerate(bests) if b <= final + abs(final) * PLATEAU_REL)
    span = its[-1] - its[0]
    if span <= 0 or (its[-1] - its[k0]) / span < PLATEAU_FRACTION:
        return None
    return its[k0], s[k0]


def gn_trend(blocks: Blocks, before: int) -> tuple[int, float] | None:
    """(start, ratio) when the grad-norm level rose steadily before iteration ``before``: the
    smoothed level just before it is >= GN_TREND_FACTOR x its minimum, and the rise started where
    the level last sat within GN_TREND_START_NEAR of that minimum."""
    its, xs = _finite(blocks.it, blocks.gn)
    pairs = [(i, x) for i, x in zip(its, xs) if i < before]
    if len(pairs) < 8:
        return None
    start = before - (before - pairs[0][0]) * GN_TREND_WINDOW  # only the recent history counts:
    pairs = [p for p in pairs if p[0] >= start]                # grad norms drift up in long runs
    half = max(1, len(pairs) // 40)  # rolling median over ~5 % of the history (at least 3 blocks)
    vals = [p[1] for p in pairs]
    sm = [median(vals[max(0, k - half):k + half + 1]) for k in range(len(vals))]
    i_min = min(range(len(sm)), key=sm.__getitem__)
    base = sm[i_min]
    if base <= 0 or sm[-1] < GN_TREND_FACTOR * base:
        return None
    k = max(k for k in range(i_min, len(sm)) if sm[k] <= GN_TREND_START_NEAR * base)
    return pairs[min(k + 1, len(pairs) - 1)][0], sm[-1] / base


def eval_rising(vals: list[tuple[int, float]], blocks: Blocks):
    """(best it, best, last it, last, train still falling) when the validation loss turned upward:
    on the 3-point median of the evals, the last is above the best by EVAL_RISE_REL and by
    EVAL_RISE_Z sigma of the evals' own noise, with at least EVAL_MIN_AFTER evals after the best."""
    vals = [(i, v) for i, v in vals if v == v and math.isfinite(v)]
    if len(vals) < EVAL_MIN_AFTER + 2:
        return None
    v = [x for _, x in vals]
    sm = _smooth3(v)
    i_min = min(range(len(sm)), key=sm.__getitem__)
    if len(sm) - 1 - i_min < EVAL_MIN_AFTER:
        return None
    best_it, best, last = vals[i_min][0], sm[i_min], sm[-1]
    sigma = robust_sigma([b - a for a, b in zip(v, v[1:])]) or 0.0
    if last < best + max(abs(best) * EVAL_RISE_REL, EVAL_RISE_Z * sigma):
        return None
    its, xs = _finite(blocks.it, blocks.loss)
    at_best = [x for i, x in zip(its, xs) if i <= best_it][-3:]
    at_end = xs[-3:]
    falling = bool(at_best and at_end and median(at_end) < median(at_best))
    return best_it, best, vals[-1][0], last, falling


def slowdown(blocks: Blocks) -> tuple[int, float] | None:
    """(first slow iteration, factor) when time per sample grew late in the run."""
    its, xs = _finite(blocks.it, blocks.tps)
    if len(xs) * blocks.size < SLOWDOWN_MIN_RECORDS or len(xs) < 10:
        return None
    ref = median(xs[len(xs) // 20 + 1:])
    tail = xs[-max(1, len(xs) // 10):]
    if ref <= 0 or median(tail) < SLOWDOWN_FACTOR * ref:
        return None
    k = len(xs) - 1
    while k > 0 and xs[k - 1] >= SLOWDOWN_FACTOR * ref:
        k -= 1
    return its[k], median(tail) / ref


# ---------------------------------------------------------------------------------------------
# one pass over a log

GAP_FACTOR = 5            # an iteration jump > 5 logging intervals is a gap in the log
MAX_SAVES, MAX_VALS, MAX_ERRORS = 100_000, 10_000, 20
SYSTEM = [("oom", re.compile(r"out of memory|OutOfMemoryError")),
          ("nccl-timeout", re.compile(r"NCCL.*(?:[Tt]imeout|timed out)|[Ww]atchdog caught collective")),
          ("lost-gpu", re.compile(r"fallen off the bus|GPU is lost|No CUDA GPUs are available|NODE FAIL")),
          ("cuda-error", re.compile(r"CUDA error|illegal memory access|CUBLAS_STATUS|CUDNN_STATUS|"
                                    r"device-side assert|\bXid\b")),
          ("storage", re.compile(r"No space left on device|Disk quota exceeded|Stale file handle|"
                                 r"Input/output error|Read-only file system")),
          ("cancelled", re.compile(r"CANCELLED AT")),
          ("exception", re.compile(r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception)\b(?::|$)"))]


@dataclass
class Summary:
    """Everything one log told the detectors; bounded in size whatever the log length."""

    path: str
    fmt: str
    records: int = 0
    first_it: int | None = None
    last_it: int | None = None
    interval: int | None = None
    first_loss: float | None = None
    last_loss: float | None = None
    min_loss: float = math.inf
    nan: tuple[int, int, int] | None = None   # first iteration, line, count
    last_finite: tuple[int, float] | None = None
    gaps: list = field(default_factory=list)        # (from, to, line)
    restarts: list = field(default_factory=list)    # (from, to, line)
    saves: list = field(default_factory=list)       # sorted iterations with a checkpoint
    save_steps: int | None = None
    vals: list = field(default_factory=list)
    errors: list = field(default_factory=list)      # (kind, iteration, line, text)
    oom_phase: str | None = None
    overflow_lines: int = 0
    ds_skipped: int = 0
    truncated: str | None = None
    loss: SpikeDetector = field(default_factory=lambda: SpikeDetector("spike"))
    gn: SpikeDetector = field(default_factory=lambda: SpikeDetector("explosion", log_space=True))
    ls: LossScaleTracker = field(default_factory=LossScaleTracker)
    lr: LRTracker = field(default_factory=LRTracker)
    blocks: Blocks = field(default_factory=Blocks)


class Analysis:
    """Feed records one at a time; ``finish()`` returns the Summary. Holds O(1) memory."""

    def __init__(self, path: str, fmt: str) -> None:
        self.s = Summary(path, fmt)
        self._diffs: list[int] = []
        self._pending_overflow = [0, 0, None]   # overflow lines, 'reducing' lines, last scale
        self._gap_next = False
        self._last_gn: float | None = None
        self._ds_lr: tuple[int, float] | None = None
        self._phase = "train"

    def feed(self, r: Record) -> None:
        s = self.s
        kind = r.kind
        if kind == "train":
            self._train(r)
        elif kind == "overflow":
            s.overflow_lines += 1
            po = self._pending_overflow
            po[1 if r.text == "reduce" else 0] += 1
            po[2] = r.loss_scale if r.loss_scale is not None else po[2]
        elif kind == "dsstep":
            s.ds_skipped = max(s.ds_skipped, r.skipped or 0)
            if r.lr is not None:
                self._ds_lr = (r.iteration, r.lr)
        elif kind in ("save", "load"):
            if r.iteration is not None and r.iteration not in s.saves[-3:]:
                if len(s.saves) >= MAX_SAVES:
                    s.saves = s.saves[::2]  # thin the old ones; the recent ones matter most
                s.saves.append(r.iteration)
        elif kind == "meta" and r.text == "save_steps":
            s.save_steps = r.iteration
        elif kind == "val":
            self._phase = "eval"
            if r.val_loss is not None:
                if len(s.vals) >= MAX_VALS:
                    s.vals = s.vals[::2]
                s.vals.append((r.iteration if r.iteration is not None else s.last_it or 0, r.val_loss))
        elif kind == "phase":
            self._phase = r.text
        elif kind == "gap":
            self._gap_next = True
        elif kind == "error":
            self._error(r)

    def _train(self, r: Record) -> None:
        s = self.s
        it = r.iteration if r.iteration is not None else (s.last_it or 0) + 1
        gap = self._gap_next
        last = s.last_it
        if last is not None:
            if it == last:
                return  # the same line printed by several ranks
            if it < last:
                if len(s.restarts) < MAX_ERRORS:
                    s.restarts.append((last, it, r.line))
                s.loss.restart()
                s.gn.restart()
                self._last_gn = None
            elif s.interval and it - last > GAP_FACTOR * s.interval:
                gap = True
            elif len(self._diffs) < 16:
                self._diffs.append(it - last)
                counts = Counter(self._diffs)
                s.interval = min(counts, key=lambda d: (-counts[d], d))  # most common step
            if gap and it > last and len(s.gaps) < MAX_ERRORS:
                s.gaps.append((last, it, r.line))
        else:
            s.first_it = it
        if gap or self._phase != "train":
            self._gap_next, self._phase = False, "train"
        s.records += 1
        s.last_it = it
        # a step skipped for overflow repeats the previous grad norm; 0.000 means "not measured"
        skipped = r.skipped or 0
        scale = r.loss_scale
        po = self._pending_overflow
        if po[0] or po[1]:
            skipped = max(skipped, po[0] or po[1])
            if scale is None:
                scale = po[2]
            self._pending_overflow = [0, 0, None]
        gn = r.grad_norm
        if gn is not None:
            if gn == 0.0 or gn == self._last_gn or skipped:
                self._last_gn, gn = gn, None
            else:
                self._last_gn = gn
        lr = r.lr
        if lr is None and self._ds_lr is not None and self._ds_lr[0] == it:
            lr = self._ds_lr[1]
        line = r.line
        if scale is not None or skipped:
            s.ls.update(it, scale, skipped, line)
            if scale is not None and not (0 < scale < INF):
                scale = None
        if lr is not None:
            s.lr.update(it, lr, line)
            if not isfinite(lr):
                lr = None
        loss = r.loss
        if loss is not None and not isfinite(loss):
            loss, bad = None, True
        else:
            bad = bool(r.nan_count)
        if gn is not None and not (0 < gn < INF):
            if scale is None and not isfinite(gn):  # with fp16 loss scaling it is an overflow
                bad = True
            gn = None
        if bad:
            first = s.nan or (it, line, 0)
            s.nan = (first[0], first[1], first[2] + 1)
        if loss is not None:
            if s.first_loss is None:
                s.first_loss = loss
            s.last_loss = loss
            if loss < s.min_loss:
                s.min_loss = loss
            s.last_finite = (it, loss)
            ev = s.loss.update(it, loss, line, gap)
            if ev is not None and s.ls.drop_start is not None and s.ls.drop_start < ev.onset:
                ev.ls_drop_start, ev.ls_drop_factor = s.ls.drop_start, s.ls.factor_now()
        if gap:
            s.gn.rebase()  # grad norms drift over long spans: never compare across a gap
        if gn is not None:
            s.gn.update(it, gn, line, gap)
        secs = r.seconds
        if secs and r.batch:
            secs /= r.batch
        s.blocks.add(it, loss, gn, scale, lr, secs)

    def _error(self, r: Record) -> None:
        s = self.s
        for kind, rx in SYSTEM:
            if rx.search(r.text):
                if kind == "oom" and s.oom_phase is None:
                    s.oom_phase = "eval" if self._phase == "eval" else "train"
                if len(s.errors) < MAX_ERRORS and not any(e[3] == r.text for e in s.errors):
                    s.errors.append((kind, r.iteration, r.line, r.text))
                return

    def finish(self) -> Summary:
        s = self.s
        s.loss.finish()
        s.gn.finish()
        s.blocks.finish()
        s.saves = sorted(set(s.saves))
        return s


def analyse(path: str | Path, fmt: str | None = None) -> Summary:
    """Stream one log through the detectors. A log cut short mid-way gives a partial Summary
    (``truncated`` says why); one with nothing readable raises ArtifactError."""
    p = Path(path)
    fmt = fmt or detect_format(p)
    if fmt is None:
        raise ArtifactError(p, "not a training log (no loss, iteration or step lines recognised)")
    a = Analysis(str(p), fmt)
    try:
        for rec in iter_records(p, fmt):
            a.feed(rec)
    except ArtifactError as err:
        if not a.s.records:
            raise
        a.s.truncated = err.problem
    except (OSError, UnicodeError) as err:
        raise ArtifactError(p, f"cannot read log: {err}") from None
    return a.finish()


