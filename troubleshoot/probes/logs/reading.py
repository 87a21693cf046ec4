"""From a log's Summary to a Reading: the instabilities, the one that matters, where to roll back.

The log probe (``probes/logs/__init__.py``) turns a Reading into findings (``findings``), facts and
the timeline (``report/timeline.py``). The instability that matters is the first error-level one
(else the largest recovered spike) of the latest attempt in the log; its *onset* is the earliest
sign, moved before the visible spike by a grad-norm explosion that began first or an early
warning (a falling loss scale, a rising grad-norm level). The rollback target is the last known
checkpoint at or before the last healthy record before that onset; the data window to skip starts
right after it. Thresholds are explained in docs/log-analysis.md.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...loaders.logs import formats
from . import trends
from .detectors import LOOKBACK, Event
from .summary import GAP_FACTOR, Summary
from .trackers import LS_COLLAPSE_FACTOR, LS_MIN_SCALE

SKIP_MIN_SPAN = 200       # a data-skip window covers at least this many iterations (GLM-130B: 200)
AFTER_WARMUP_FACTOR = 2.0  # "near the end of warmup": onset within 2x the warmup length after it
BEFORE_WARMUP_FRACTION = 0.25  # ... or in the last quarter of the warmup itself
BLIP_RECORDS = 3          # single-batch values back at their level within 3 records: a blip
EARLY_LS_FACTOR = 4.0     # early warning: loss scale >= 4x below its reference when the loss
EARLY_MIN_RECORDS = 5     # spike begins, and falling since >= 5 logged records before it
SKIP_WARN_FRACTION = 0.05  # skipped iterations after start-up / logged iterations: warning
SKIP_ERROR_FRACTION = 0.25  # ... error


def is_blip(s: Summary, ev: Event) -> bool:
    """An excursion of single-batch values that is back at its level within BLIP_RECORDS records:
    one or two bad batches. Grad norms are always single-step values; losses are when logged every iteration
    (or by nanoGPT, which prints the loss of one batch)."""
    if not (ev.recovered and ev.records <= BLIP_RECORDS):  # counts the record back at level
        return False
    if ev.kind != "explosion":
        return s.interval == 1 or formats.get(s.fmt).per_batch
    return loss_event_near(s, ev) is None  # a grad-norm blip beside a loss spike is part of it


def loss_event_near(s: Summary, g: Event) -> Event | None:
    """The (non-blip) loss event that a grad-norm event precedes or accompanies."""
    iv = s.interval or 1
    return next((ev for ev in s.loss.events if not is_blip(s, ev) and
                 (g.onset <= ev.onset <= g.onset + LOOKBACK * iv or ev.onset <= g.onset <= ev.peak_it)), None)


@dataclass
class Instability:
    """One loss spike, divergence or NaN, with the last iteration known to be healthy before it."""

    what: str            # spike | divergence | nan
    severity: str
    onset: int
    bound: int           # the last iteration known to be healthy: roll back at or before it
    peak: int
    event: Event | None = None

    @property
    def window(self) -> tuple[int, int]:
        """The data window to skip: after the last healthy record, at least SKIP_MIN_SPAN long."""
        start = self.bound + 1
        return start, max(self.peak, start + SKIP_MIN_SPAN - 1)


def instabilities(s: Summary) -> list[Instability]:
    """Error- and warning-level instabilities (blips left out), earliest first."""
    iv = s.interval or 1
    out = []
    for ev in s.loss.events:
        if is_blip(s, ev):
            continue
        bound = ev.onset_prev if ev.onset_prev is not None else ev.onset - iv
        out.append(Instability(ev.kind, "warning" if ev.recovered else "error", ev.onset, bound,
                               ev.end or ev.peak_it, ev))
    d = trends.drift(s.blocks)
    if d:
        same = [i for i in out if i.severity == "error" and i.onset >= d.min_it - iv * s.blocks.size]
        for i in same:  # the visible part of the same climb: it began where the loss bottomed out
            i.onset, i.bound = min(i.onset, d.onset), min(i.bound, d.min_it)
        if not same:
            out.append(Instability("divergence", "error", d.onset, d.min_it, d.onset))  # no data window
    if s.nan:
        fin = s.last_finite
        bound = fin[0] if fin and fin[0] < s.nan[0] else s.nan[0] - iv
        out.append(Instability("nan", "error", s.nan[0], bound, s.nan[0]))
    return sorted(out, key=lambda i: (i.onset, i.severity != "error"))


def linked_explosion(s: Summary, inst: Instability) -> Event | None:
    """The grad-norm explosion that began shortly before (or with) the loss event."""
    if inst.event is None:
        return None
    lo = inst.event.onset - LOOKBACK * (s.interval or 1)
    near = [g for g in s.gn.events if lo <= g.onset <= inst.event.peak_it]
    return min(near, key=lambda g: g.onset) if near else None


def early_onset(s: Summary, inst: Instability) -> tuple[int, str] | None:
    """The earliest sign before the visible instability: a falling loss scale or a rising grad-norm
    level, when it began at least EARLY_MIN_RECORDS logged records before the onset."""
    lead = EARLY_MIN_RECORDS * (s.interval or 1)
    ev = inst.event
    if ev is not None and ev.ls_drop_start is not None and ev.ls_drop_factor >= EARLY_LS_FACTOR \
            and ev.ls_drop_start <= inst.onset - lead:
        return ev.ls_drop_start, f"the loss scale had been falling since {ev.ls_drop_start} " \
                                 f"({ev.ls_drop_factor:.0f}x down)"
    trend = trends.gn_trend(s.blocks, inst.onset)
    if trend and trend[0] <= inst.onset - max(lead, 2 * s.blocks.size * (s.interval or 1)):
        return trend[0], f"the grad-norm level had been rising since {trend[0]} ({trend[1]:.1f}x its minimum)"
    return None


def warmup_end(s: Summary) -> int | None:
    """The logged end of warmup; None when unknown or when the LR reached its peak inside a gap."""
    w, lr = s.lr.warmup_end, s.lr
    if w is None or lr.rise_from is None:
        return w
    return None if w - lr.rise_from > GAP_FACTOR * (s.interval or 1) else w


def near_warmup(s: Summary, onset: int) -> bool | None:
    """Whether ``onset`` lies near the end of LR warmup; None when the warmup end is unknown."""
    w = warmup_end(s)
    if w is None:
        return None
    return w - BEFORE_WARMUP_FRACTION * w <= onset <= w + AFTER_WARMUP_FACTOR * max(w, 1)


def skip_stats(s: Summary) -> tuple[int, int, float]:
    """(iterations skipped for overflow after start-up, iterations after start-up, fraction)."""
    ls = s.ls
    after = max(ls.skips, s.ds_skipped - ls.startup_skips)
    start = ls.calibrated_at if ls.calibrated_at is not None else s.first_it or 0
    n = max(1, (s.last_it or 0) - start)
    return after, n, after / n


def loss_scale_severity(s: Summary) -> str | None:
    """error (pinned at the minimum, or many skipped steps), warning (a collapse), or None."""
    ls = s.ls
    skipped, _, frac = skip_stats(s)
    if (ls.seen and ls.min <= LS_MIN_SCALE) or (frac >= SKIP_ERROR_FRACTION and skipped >= 3):
        return "error"
    if (ls.worst and ls.worst[0] >= LS_COLLAPSE_FACTOR) or (frac >= SKIP_WARN_FRACTION and skipped >= 3):
        return "warning"
    return None


# ---------------------------------------------------------------------------------------------
# the reading

@dataclass
class Reading:
    """What one log says, ready for findings, facts and the timeline."""

    summary: Summary
    insts: list[Instability]
    main: Instability | None
    early: tuple[int, str] | None
    rollback: tuple[int, str] | None       # iteration, where it came from
    markers: list[tuple[int, str, str]]    # (iteration, symbol, label) for the timeline / plot

    @property
    def onset(self) -> int | None:
        """The earliest sign of the main instability (None when there is none)."""
        if self.main is None:
            return None
        return min(self.main.onset, self.early[0]) if self.early else self.main.onset

    @property
    def skip_range(self) -> str | None:
        """``START-END`` for ``--skip-train-iteration-range``."""
        return "%d-%d" % self.main.window if self.main else None

    def plateau(self) -> tuple[int, float] | None:
        """A flat loss, unless it is flat because it is rising (divergence) or unrecovered."""
        if any(i.severity == "error" and i.what in ("divergence", "spike") for i in self.insts):
            return None
        return trends.plateau(self.summary.blocks, self.summary.records)


def read(s: Summary, folder_saves: list[int] | None = None) -> Reading:
    """The Reading of one Summary; ``folder_saves`` are checkpoint iterations named by folders."""
    insts = instabilities(s)
    last = s.loss.segment  # after a restart in the log, the latest attempt is the one to fix
    current = [i for i in insts if i.event is None or i.event.segment == last] or insts
    errors = [i for i in current if i.severity == "error"]
    spikes = [i for i in current if i.event is not None]
    main = errors[0] if errors else max(spikes, key=lambda i: i.event.ratio) if spikes else None
    early = rollback = None
    if main:
        g = linked_explosion(s, main)
        if g is not None and g.onset < main.onset:  # the grad norm moved first
            main.onset, main.bound = g.onset, g.onset_prev if g.onset_prev is not None else g.onset - 1
        early = early_onset(s, main)
        bound = min(main.bound, early[0] - 1) if early else main.bound
        rollback = _rollback(s, bound, folder_saves)
    return Reading(s, insts, main, early, rollback, _markers(s, early, rollback))


def _rollback(s: Summary, bound: int, folder_saves: list[int] | None) -> tuple[int, str] | None:
    """(iteration, where it came from) of the last checkpoint known at or before ``bound``."""
    logged = [x for x in s.saves if x <= bound]
    named = [x for x in folder_saves or () if x <= bound]
    if logged or named:
        best = max(logged + named)
        return (best, "a 'saving checkpoint' line in the log" if best in logged
                else "the checkpoint folders given alongside")
    if s.save_steps and bound >= s.save_steps:
        return (bound // s.save_steps * s.save_steps,
                f"save_steps={s.save_steps} in trainer_state.json; check that it still exists")
    return None


def _markers(s: Summary, early: tuple[int, str] | None,
             rollback: tuple[int, str] | None) -> list[tuple[int, str, str]]:
    """(iteration, symbol, label) of every event worth marking on the timeline and the plot."""
    marks = [(ev.onset, "^" if ev.kind == "spike" else "D", f"loss {ev.kind}")
             for ev in s.loss.events if not is_blip(s, ev)]
    marks += [(g.onset, "G", "grad-norm explosion") for g in s.gn.events if not is_blip(s, g)]
    if s.nan:
        marks.append((s.nan[0], "N", "NaN"))
    if s.ls.worst and s.ls.worst[0] >= LS_COLLAPSE_FACTOR:
        marks.append((s.ls.worst[1], "L", "loss-scale collapse"))
    if warmup_end(s) is not None:
        marks.append((warmup_end(s), "W", "warmup end"))
    if early:
        marks.append((early[0], "E", "early warning"))
    if rollback:
        marks.append((rollback[0], "R", "rollback"))
    return marks
