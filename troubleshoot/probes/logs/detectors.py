"""The excursion detector of the log probe: loss spikes and divergences, grad-norm explosions.

``SpikeDetector`` follows one series online: a new value is compared with the rolling median of
the last ``LEVEL_WINDOW`` records plus a margin of robust sigmas (``stats.robust_sigma``) or
a relative floor, whichever is larger; an excursion becomes an ``Event`` that is followed until
the series is back at its level or settles at a new one. Memory is fixed (``LEVEL_WINDOW`` /
``NOISE_WINDOW`` / ``LOOKBACK`` records, at most ``MAX_EVENTS`` events) whatever the log size.
Every threshold is explained, with the reasoning behind each number, in docs/log-analysis.md.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from .stats import median, robust_sigma

LEVEL_WINDOW = 8          # records whose median is the level a new value is compared with
NOISE_WINDOW = 32         # successive differences behind the noise estimate sigma
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
GN_FACTOR = 2.0           # grad-norm explosion: > GN_FACTOR x its level (and > GN_Z sigma in log)
GN_Z = 6.0
GN_RECOVER_FACTOR = 1.5
GN_ONSET_FACTOR = 1.25
MAX_EVENTS = 200          # events kept per detector (later ones are only counted)


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
        """Peak over the level before the event (inf when that level is 0)."""
        return self.peak / self.level if self.level else math.inf


class SpikeDetector:
    """Rolling-median / robust-sigma excursion detector for one series.

    ``log_space`` compares log(value) (grad norms are multiplicative); the floor is then
    ``log(factor)`` instead of ``rel * level``.
    """

    def __init__(self, kind: str, log_space: bool = False) -> None:
        self.kind, self.log = kind, log_space
        self.z = GN_Z if log_space else SPIKE_Z   # sigmas above the level that open an event
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
            if level is not None and x > level + self._margin(level, self.sigma, self.z, SPIKE_REL, GN_FACTOR):
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
        self._thr = level + self._margin(level, self.sigma, self.z, SPIKE_REL, GN_FACTOR)

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

