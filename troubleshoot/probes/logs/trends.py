"""Slow trends of a whole run, read from its block summaries after the stream ended.

What a rolling window cannot see: a loss that climbs too slowly to spike (``drift``), a loss that
stopped improving (``plateau``), a grad-norm level creeping up before an instability
(``gn_trend``, the early warning), validation loss turning upward (``eval_rising``) and
iterations getting slower (``slowdown``). Each reads at most ``MAX_BLOCKS`` points, smoothed by a
short running median so that one bad block does not make a trend. Thresholds are explained in
docs/log-analysis.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .stats import Blocks, median, robust_sigma

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
    """Running median of three: one odd block does not bend the curve."""
    return [median(xs[max(0, i - 1):i + 2]) for i in range(len(xs))]


def _finite(its, xs) -> tuple[list[int], list[float]]:
    """The (iterations, values) pairs whose value is finite: blocks without that series are NaN."""
    pairs = [(i, x) for i, x in zip(its, xs) if x == x and math.isfinite(x)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


@dataclass
class Drift:
    """A slow divergence: where the smoothed loss bottomed out and where it ended."""

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

