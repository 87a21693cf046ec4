"""Training-log probe: what happened in the run, when, and where to roll back to.

Every log among the artifacts (and the ``trainer_state.json`` / event files inside checkpoint
folders) is streamed once through ``logseries`` (bounded memory); the resulting Summary becomes
findings, facts (rules/_facts/logs.yaml) and a terminal timeline. Sample, on the BLOOM-104B
excerpt quoted in seed 002 (real-logs/01_megatron_bigscience.log)::

    error    01.log:5  logs.spike  loss spike at iteration 7010: 6.445 -> 11.42 (1.8x its level);
                       not recovered by the end of the log (last 7.155, +11 % and falling)
    warning  01.log:5  logs.grad_norm_explosion  grad norm exploded at iteration 7010: 9.826e+04 ->
                       2.196e+05 (2.24x); back to normal by 7220; at the same logged iteration as the loss
    info     01.log    logs.rollback  instability began at 7010 (last healthy record 7000); no checkpoint
                       before it is known (give the checkpoint folder alongside the log); data window
                       to skip: --skip-train-iteration-range 7001-7200
    info     01.log:7  logs.gap  the log skips iterations between 7010-7220: events inside a gap cannot
                       be located

How to read it: the *onset* is the first logged iteration that left the baseline (logged
iteration N covers the steps since the previous logged one), the *peak* the worst value, and
"recovered" means back within RECOVER_REL of the pre-event level. Excursions of single-batch
values (per-step logging, nanoGPT, grad norms) that are back at their level within BLIP_RECORDS
records are *blips* - one bad batch - and are only counted. The rollback target is the last checkpoint saved at or before the last healthy record
before the *onset* of the instability, where the earliest sign (grad norm, a loss scale falling
for a while) counts, not the visible spike.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ArtifactError
from ..loaders.logs import DETAILS, find_logs_in
from ..observations import Observations
from . import ProbeContext
from . import logseries as S
from .logseries import Event, Summary, analyse

SOURCE = "probe:logs"
SKIP_MIN_SPAN = 200       # a data-skip window covers at least this many iterations (GLM-130B: 200)
AFTER_WARMUP_FACTOR = 2.0  # "near the end of warmup": onset within 2x the warmup length after it
BEFORE_WARMUP_FRACTION = 0.25  # ... or in the last quarter of the warmup itself
MAX_LISTED = 10           # warning-level spikes / explosions listed one by one (errors: all)
PER_BATCH_FORMATS = ("nanogpt",)  # formats whose logged loss is one batch, whatever the interval
ERROR_IDS = {"oom": "logs.oom", "exception": "logs.exception", "cancelled": "logs.job_end"}


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:.4g}"


def _pct(new: float, old: float) -> str:
    return f"{(new / old - 1) * 100:+.0f} %" if old else "?"


def _its(n: int) -> str:
    return f"{n} iteration" + ("" if n == 1 else "s")


def _where(s: Summary, line: int | None) -> str:
    if not line:
        return s.path
    return f"{s.path}:log_history[{line - 1}]" if s.fmt == "trainer-state" else f"{s.path}:{line}"


def is_blip(s: Summary, ev: Event) -> bool:
    """An excursion of single-batch values that is back at its level within BLIP_RECORDS records:
    one or two bad batches. Grad norms are always single-step values; losses are when logged every iteration
    (or by nanoGPT, which prints the loss of one batch)."""
    if not (ev.recovered and ev.records <= S.BLIP_RECORDS):  # counts the record back at level
        return False
    if ev.kind != "explosion":
        return s.interval == 1 or s.fmt in PER_BATCH_FORMATS
    return _loss_event_near(s, ev) is None  # a grad-norm blip beside a loss spike is part of it


def _loss_event_near(s: Summary, g: Event) -> Event | None:
    """The (non-blip) loss event that a grad-norm event precedes or accompanies."""
    iv = s.interval or 1
    return next((ev for ev in s.loss.events if not is_blip(s, ev) and
                 (g.onset <= ev.onset <= g.onset + S.LOOKBACK * iv or ev.onset <= g.onset <= ev.peak_it)), None)


def checkpoint_iterations(folder: Path) -> list[int]:
    """Iterations of the checkpoints in a run folder (or beside a checkpoint folder), by name only:
    ``global_stepN``, ``iter_000N``, ``checkpoint-N``, and what ``latest`` files point at."""
    out: set[int] = set()
    roots = [folder] + ([folder.parent] if re.search(r"global_step|iter_|checkpoint-", folder.name) else [])
    for root in roots:
        if not root.is_dir():
            continue
        for child in root.iterdir():
            m = re.fullmatch(r"(?:global_step|iter_|checkpoint-)0*(\d+)", child.name)
            if m and child.is_dir():
                out.add(int(m.group(1)))
            elif child.name in ("latest", "latest_checkpointed_iteration.txt") and child.is_file():
                m = re.search(r"(\d+)", child.read_text(errors="replace")[:100])
                if m:
                    out.add(int(m.group(1)))
    return sorted(out)


# ---------------------------------------------------------------------------------------------
# from a Summary to a reading: the instabilities, the one that matters, where to roll back

@dataclass
class Instability:
    what: str            # spike | divergence | nan
    severity: str
    onset: int
    bound: int           # the last iteration known to be healthy: roll back at or before it
    peak: int
    event: Event | None = None

    @property
    def window(self) -> tuple[int, int]:
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
    d = S.drift(s.blocks)
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
    lo = inst.event.onset - S.LOOKBACK * (s.interval or 1)
    near = [g for g in s.gn.events if lo <= g.onset <= inst.event.peak_it]
    return min(near, key=lambda g: g.onset) if near else None


def early_onset(s: Summary, inst: Instability) -> tuple[int, str] | None:
    """The earliest sign before the visible instability: a falling loss scale or a rising grad-norm
    level, when it began at least EARLY_MIN_RECORDS logged records before the onset."""
    lead = S.EARLY_MIN_RECORDS * (s.interval or 1)
    ev = inst.event
    if ev is not None and ev.ls_drop_start is not None and ev.ls_drop_factor >= S.EARLY_LS_FACTOR \
            and ev.ls_drop_start <= inst.onset - lead:
        return ev.ls_drop_start, f"the loss scale had been falling since {ev.ls_drop_start} " \
                                 f"({ev.ls_drop_factor:.0f}x down)"
    trend = S.gn_trend(s.blocks, inst.onset)
    if trend and trend[0] <= inst.onset - max(lead, 2 * s.blocks.size * (s.interval or 1)):
        return trend[0], f"the grad-norm level had been rising since {trend[0]} ({trend[1]:.1f}x its minimum)"
    return None


def warmup_end(s: Summary) -> int | None:
    """The logged end of warmup; None when unknown or when the LR reached its peak inside a gap."""
    w, lr = s.lr.warmup_end, s.lr
    if w is None or lr.rise_from is None:
        return w
    return None if w - lr.rise_from > S.GAP_FACTOR * (s.interval or 1) else w


def near_warmup(s: Summary, onset: int) -> bool | None:
    w = warmup_end(s)
    if w is None:
        return None
    return w - BEFORE_WARMUP_FRACTION * w <= onset <= w + AFTER_WARMUP_FACTOR * max(w, 1)


def plateau(rd: "Reading") -> tuple[int, float] | None:
    """A flat loss, unless it is flat because it is rising (divergence) or unrecovered."""
    if any(i.severity == "error" and i.what in ("divergence", "spike") for i in rd.insts):
        return None
    return S.plateau(rd.summary.blocks, rd.summary.records)


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
        if self.main is None:
            return None
        return min(self.main.onset, self.early[0]) if self.early else self.main.onset

    @property
    def skip_range(self) -> str | None:
        return "%d-%d" % self.main.window if self.main else None


def read(s: Summary, folder_saves: list[int] | None = None) -> Reading:
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
        logged = [x for x in s.saves if x <= bound]
        named = [x for x in folder_saves or () if x <= bound]
        if logged or named:
            best = max(logged + named)
            rollback = (best, "a 'saving checkpoint' line in the log" if best in logged
                        else "the checkpoint folders given alongside")
        elif s.save_steps and bound >= s.save_steps:
            rollback = (bound // s.save_steps * s.save_steps,
                        f"save_steps={s.save_steps} in trainer_state.json; check that it still exists")
    marks = [(ev.onset, "^" if ev.kind == "spike" else "D", f"loss {ev.kind}")
             for ev in s.loss.events if not is_blip(s, ev)]
    marks += [(g.onset, "G", "grad-norm explosion") for g in s.gn.events if not is_blip(s, g)]
    if s.nan:
        marks.append((s.nan[0], "N", "NaN"))
    if s.ls.worst and s.ls.worst[0] >= S.LS_COLLAPSE_FACTOR:
        marks.append((s.ls.worst[1], "L", "loss-scale collapse"))
    if warmup_end(s) is not None:
        marks.append((warmup_end(s), "W", "warmup end"))
    if early:
        marks.append((early[0], "E", "early warning"))
    if rollback:
        marks.append((rollback[0], "R", "rollback"))
    return Reading(s, insts, main, early, rollback, marks)


# ---------------------------------------------------------------------------------------------
# findings

def findings(rd: Reading, obs: Observations) -> None:
    s = rd.summary
    span = f"iterations {s.first_it}-{s.last_it}" if s.records else "no training records"
    every = f", logged every {s.interval}" if s.interval else ""
    loss = f"; loss {_g(s.first_loss)} -> {_g(s.last_loss)} (min {_g(s.min_loss)})" \
        if s.first_loss is not None else ""
    obs.find("logs.summary", "info", f"parsed {s.records} training records ({DETAILS[s.fmt]}), "
             f"{span}{every}{loss}", s.path,
             {"format": s.fmt, "records": s.records, "first": s.first_it, "last": s.last_it})
    if s.truncated:
        obs.find("logs.truncated", "warning", f"log cut short ({s.truncated}); the {s.records} "
                 "records before that were analysed", s.path)
    if s.nan:
        it, line, n = s.nan
        last = f"; last finite loss {_g(s.last_finite[1])} at {s.last_finite[0]}" if s.last_finite else ""
        obs.find("logs.nan", "error", f"loss became NaN/Inf at iteration {it} ({n} record(s) with "
                 f"NaN/Inf or nan iterations){last}", _where(s, line), {"iteration": it, "records": n})
    _event_findings(s, s.loss.events, "loss", obs)
    d = next((i for i in rd.insts if i.what == "divergence" and i.event is None), None)
    if d:
        dr = S.drift(s.blocks)
        obs.find("logs.divergence", "error", f"loss diverging slowly since about iteration {d.onset}: "
                 f"smoothed loss {_g(dr.minimum)} at {dr.min_it} -> {_g(dr.final)} at the end "
                 f"({_pct(dr.final, dr.minimum)}), without a single spike", s.path,
                 {"onset": d.onset, "min": dr.minimum, "final": dr.final})
    _event_findings(s, s.gn.events, "grad norm", obs)
    _loss_scale_findings(s, obs)
    _lr_finding(rd, obs)
    if rd.main:
        _rollback_findings(rd, obs)
    p = plateau(rd)
    if p:
        stuck = s.first_loss is not None and p[1] >= 0.9 * s.first_loss
        obs.find("logs.plateau", "warning" if stuck else "info",
                 f"loss flat since about iteration {p[0]} at {_g(p[1])}"
                 + (", barely below the first logged loss" if stuck else " (converged, or the LR is too low)"),
                 s.path, {"since": p[0], "level": p[1]})
    e = S.eval_rising(s.vals, s.blocks)
    if e:
        obs.find("logs.eval_loss_rising", "warning", f"validation loss rising since iteration {e[0]}: "
                 f"{_g(e[1])} -> {_g(e[3])} at {e[2]}"
                 + (" while the training loss keeps falling" if e[4] else ""), s.path)
    sd = S.slowdown(s.blocks)
    if sd:
        obs.find("logs.slowdown", "warning", f"iterations {sd[1]:.1f}x slower per sample since about "
                 f"{sd[0]} than over the whole run (a slow node, throttling or I/O?)", s.path)
    seen = set()
    for kind, it, line, text in s.errors:
        if kind in ("cancelled", "exception") and kind in seen:
            continue
        seen.add(kind)
        sev = "info" if kind == "cancelled" else "warning" if kind == "exception" else "error"
        fid = ERROR_IDS.get(kind, "logs.system_error")
        phase = f" during {s.oom_phase}" if kind == "oom" else ""
        at = f" after iteration {it}" if it is not None else ""
        obs.find(fid, sev, f"{kind}{phase}{at}: {text[:200]}", _where(s, line))
    if s.gaps:
        text = ", ".join(f"{a}-{b}" for a, b, _ in s.gaps[:5])
        obs.find("logs.gap", "info", f"the log skips iterations between {text}: events inside a gap "
                 "cannot be located", _where(s, s.gaps[0][2]))
    for a, b, line in s.restarts[:5]:
        obs.find("logs.restart", "info", f"the log goes back from iteration {a} to {b} (a resume "
                 "from a checkpoint, or several runs in one file)", _where(s, line))


def _event_findings(s: Summary, events: list[Event], what: str, obs: Observations) -> None:
    blips = [ev for ev in events if is_blip(s, ev)]
    listed = 0
    for ev in events:
        if ev in blips:
            continue
        if ev.recovered and listed >= MAX_LISTED:
            continue
        listed += ev.recovered
        (_loss_finding if what == "loss" else _gn_finding)(s, ev, obs)
    rest = sum(1 for ev in events if ev not in blips and ev.recovered) - MAX_LISTED
    if rest > 0:
        obs.find("logs.spike" if what == "loss" else "logs.grad_norm_explosion", "info",
                 f"{rest} more recovered {what} excursions not listed", s.path)
    if blips:
        big = max(blips, key=lambda ev: ev.ratio)
        obs.find("logs.blips", "info", f"{len(blips)} short {what} outlier{'s' * (len(blips) > 1)} (each back to its "
                 f"level within {S.BLIP_RECORDS - 1} records; largest {big.ratio:.2g}x at {big.start}): batch-to-batch "
                 "noise, not an instability", _where(s, big.line), {"count": len(blips)})


def _loss_finding(s: Summary, ev: Event, obs: Observations) -> None:
    what = "loss spike" if ev.kind == "spike" else "loss rising"
    msg = f"{what} at iteration {ev.start}: {_g(ev.level)} -> {_g(ev.peak)} ({ev.ratio:.2g}x its level)"
    if ev.peak_it != ev.start:
        msg += f", peak at {ev.peak_it}"
    if ev.onset != ev.start:
        msg += f"; the rise began at {ev.onset}"
    if ev.across_gap:
        msg += "; the rise happened inside a gap of the log"
    if ev.recovered:
        msg += f"; recovered by {ev.end} ({_its(ev.end - ev.onset)})"
    elif ev.records >= S.SETTLE_RECORDS:
        msg += f"; did not recover: settled at {_g(ev.settled)} ({_pct(ev.settled, ev.level)})"
    else:
        falling = " and falling" if ev.last is not None and ev.last < ev.peak * 0.9 else ""
        msg += f"; not recovered by the end of the log (last {_g(ev.last)}, " \
               f"{_pct(ev.last or ev.peak, ev.level)}{falling})"
    w = warmup_end(s)
    if near_warmup(s, ev.onset):
        msg += f"; near the end of LR warmup ({w})"
    elif w is not None and ev.onset < w:
        msg += f"; during LR warmup (ends at {w})"
    fid = "logs.spike" if ev.kind == "spike" else "logs.divergence"
    obs.find(fid, "warning" if ev.recovered else "error", msg, _where(s, ev.line),
             {"onset": ev.onset, "start": ev.start, "peak_iteration": ev.peak_it, "peak": ev.peak,
              "level": ev.level, "recovered": ev.recovered, "end": ev.end})


def _gn_finding(s: Summary, g: Event, obs: Observations) -> None:
    msg = f"grad norm exploded at iteration {g.start}: {_g(g.level)} -> {_g(g.peak)} ({g.ratio:.3g}x)"
    if g.peak_it != g.start:
        msg += f", peak at {g.peak_it}"
    if g.onset != g.start:
        msg += f"; the rise began at {g.onset}"
    msg += f"; back to normal by {g.end}" if g.recovered else "; still high at the end of the log"
    spike = _loss_event_near(s, g)
    if spike:
        lead = spike.onset - g.onset
        msg += (f"; {_its(lead)} before the loss left its level at {spike.onset}" if lead > 0
                else "; at the same logged iteration as the loss" if lead == 0
                else f"; {_its(-lead)} after the loss began rising")
    obs.find("logs.grad_norm_explosion", "warning", msg, _where(s, g.line),
             {"onset": g.onset, "peak": g.peak, "level": g.level, "recovered": g.recovered})


def skip_stats(s: Summary) -> tuple[int, int, float]:
    """(iterations skipped for overflow after start-up, iterations after start-up, fraction)."""
    ls = s.ls
    after = max(ls.skips, s.ds_skipped - ls.startup_skips)
    start = ls.calibrated_at if ls.calibrated_at is not None else s.first_it or 0
    n = max(1, (s.last_it or 0) - start)
    return after, n, after / n


def loss_scale_severity(s: Summary) -> str | None:
    ls = s.ls
    skipped, _, frac = skip_stats(s)
    if (ls.seen and ls.min <= S.LS_MIN_SCALE) or (frac >= S.SKIP_ERROR_FRACTION and skipped >= 3):
        return "error"
    if (ls.worst and ls.worst[0] >= S.LS_COLLAPSE_FACTOR) or (frac >= S.SKIP_WARN_FRACTION and skipped >= 3):
        return "warning"
    return None


def _loss_scale_findings(s: Summary, obs: Observations) -> None:
    ls = s.ls
    if ls.startup_skips:
        obs.find("logs.loss_scale_startup", "info", f"{_its(ls.startup_skips)} skipped while the fp16 "
                 f"loss scale searched its start value (normal), settled by {ls.calibrated_at}", s.path)
    sev = loss_scale_severity(s)
    if not sev:
        return
    skipped, n, frac = skip_stats(s)
    parts = []
    if ls.worst:
        factor, start, _, scale, at = ls.worst
        when = f"at {at}" if start == at else f"from {start} to {at}"
        parts.append(f"loss scale fell {factor:.0f}x ({_g(scale * factor)} -> {_g(scale)}) {when}")
    if ls.seen and ls.min <= S.LS_MIN_SCALE:
        parts.append(f"pinned at the minimum {_g(ls.min)}")
    parts.append(f"{skipped} of {n} iterations skipped for overflow after start-up ({frac:.0%})")
    obs.find("logs.loss_scale_collapse", sev, "; ".join(parts), _where(s, ls.worst[2] if ls.worst else None),
             {"skipped": skipped, "fraction": round(frac, 4), "min_scale": ls.min if ls.seen else None})


def _lr_finding(rd: Reading, obs: Observations) -> None:
    s, lr = rd.summary, rd.summary.lr
    w = warmup_end(s)
    if w is not None:
        msg = f"LR warmup ended at iteration {w} (peak LR {lr.peak:.3g})"
        if rd.main is not None:
            d = rd.main.onset - w
            msg += f"; the {rd.main.what} began {_its(abs(d))} {'after' if d >= 0 else 'before'} it"
        obs.find("logs.warmup_end", "info", msg, _where(s, lr.peak_line), {"iteration": w})
    elif lr.warmup_end is not None:
        obs.find("logs.warmup_end", "info", f"the LR reached its peak {lr.peak:.3g} between iterations "
                 f"{lr.rise_from} and {lr.warmup_end}, inside a gap of the log", s.path)
    elif lr.still_warming:
        obs.find("logs.warmup_end", "info", f"the LR is still rising at the end of the log "
                 f"({lr.peak:.3g} at {lr.peak_it}): warmup not finished", s.path)


def _rollback_findings(rd: Reading, obs: Observations) -> None:
    s, m = rd.summary, rd.main
    if rd.early:
        obs.find("logs.early_warning", "warning", f"early warning: {rd.early[1]}, "
                 f"{_its(m.onset - rd.early[0])} before the {m.what} at {m.onset}", s.path,
                 {"onset": rd.early[0], "visible": m.onset})
    target = (f"roll back to iteration {rd.rollback[0]} (from {rd.rollback[1]})" if rd.rollback
              else "no checkpoint before it is known (give the checkpoint folder alongside the log)")
    note = "; it recovered by itself, so this is only needed if it recurs" if m.severity != "error" else ""
    healthy = min(m.bound, rd.onset - 1) if rd.early else m.bound
    obs.find("logs.rollback", "info", f"instability began at {rd.onset} (last healthy record {healthy}); "
             f"{target}; data window to skip: --skip-train-iteration-range {rd.skip_range}{note}", s.path,
             {"onset": rd.onset, "rollback": rd.rollback[0] if rd.rollback else None,
              "skip_range": rd.skip_range})


# ---------------------------------------------------------------------------------------------
# facts

def facts(rd: Reading, obs: Observations) -> None:
    """Publish the rules/_facts/logs.yaml facts that this log determines (never guesses)."""
    s = rd.summary
    iv = s.interval or 1

    def f(name, value, note=""):
        obs.fact(name, value, SOURCE, note or s.path)

    from_start = s.first_it is not None and s.first_it <= 2 * iv + 1
    if s.last_it is not None:
        f("logs.last_iteration", s.last_it)
    if s.first_loss is not None and from_start:
        f("logs.initial_loss", s.first_loss)
    if s.lr.peak:
        f("logs.lr_peak", s.lr.peak)
    w = warmup_end(s)
    if w is not None:
        f("logs.warmup_end_iteration", w)
    f("logs.nan", s.nan is not None)
    if s.nan:
        f("logs.nan_iteration", s.nan[0])
        if from_start or w is not None:
            f("logs.nan_early", (from_start and s.nan[0] - s.first_it < 100 * iv) or (w is not None and s.nan[0] <= w))
    if s.records >= 3 and s.first_loss is not None:
        spikes = [i for i in rd.insts if i.what == "spike"]
        f("logs.spike", bool(spikes))
        if spikes:
            sp = next((i for i in spikes if i.severity == "error"), None) or max(spikes, key=lambda i: i.event.ratio)
            f("logs.spike_iteration", sp.event.onset)
            f("logs.spike_recovered", sp.event.recovered)
            if sp.event.recovered:
                f("logs.recovery_iterations", sp.event.end - sp.event.onset)
        f("logs.divergence", any(i.what == "divergence" and i.severity == "error" for i in rd.insts))
        f("logs.plateau", plateau(rd) is not None)
    if any(g == g for g in s.blocks.gn):
        f("logs.grad_norm_explosion", any(not is_blip(s, g) for g in s.gn.events))
    if s.ls.seen or s.overflow_lines or s.ds_skipped:
        f("logs.loss_scale_collapse", loss_scale_severity(s) is not None)
        f("logs.skipped_iterations", skip_stats(s)[0])
        if s.ls.seen:
            f("logs.loss_scale_min", s.ls.min)
    if rd.main:
        f("logs.early_warning", rd.early is not None)
        f("logs.instability_onset", rd.onset)
        f("logs.skip_range", rd.skip_range)
        near = near_warmup(s, rd.onset)
        if near is not None:
            f("logs.spike_after_warmup", near)
        if rd.rollback:
            f("logs.rollback_iteration", rd.rollback[0], f"{s.path}: {rd.rollback[1]}")
        g = linked_explosion(s, rd.main)
        if g is not None:
            f("logs.grad_norm_lead", max(0, rd.main.event.onset - g.onset))
    if len(s.saves) >= 2:
        f("logs.checkpoint_interval", int(S.median([b - a for a, b in zip(s.saves, s.saves[1:])])))
    elif s.save_steps:
        f("logs.checkpoint_interval", s.save_steps)
    if len(s.vals) >= 4:
        f("logs.eval_loss_rising", S.eval_rising(s.vals, s.blocks) is not None)
    if s.fmt in ("megatron", "deepspeed", "nanogpt", "hf-stdout", "text"):
        f("logs.oom_phase", s.oom_phase or "none")
        kinds = {k for k, *_ in s.errors}
        system = next((k for k in ("lost-gpu", "nccl-timeout", "cuda-error", "storage") if k in kinds), None)
        f("logs.system_error", system or ("slowdown" if S.slowdown(s.blocks) else "none"))


# ---------------------------------------------------------------------------------------------
# the probe

def _logs_of(ctx: ProbeContext) -> tuple[list[tuple[str, str | None]], list[int]]:
    """(log paths with their format when known, checkpoint iterations named by the folders given)."""
    logs: list[tuple[str, str | None]] = []
    saves: list[int] = []
    seen: set[str] = set()
    for a in ctx.artifacts:
        p = Path(a.path)
        if a.kind == "log" and not p.is_dir():
            key = str(p.resolve())
            if key not in seen:
                seen.add(key)
                logs.append((a.path, next((k for k, v in DETAILS.items() if v == a.detail), None)))
        elif p.is_dir():
            saves.extend(checkpoint_iterations(p))
            for q in find_logs_in(p):
                if str(q.resolve()) not in seen:
                    seen.add(str(q.resolve()))
                    logs.append((str(q), "found"))
    return logs, sorted(set(saves))


RANK = {"error": 2, "warning": 1}


def run(ctx: ProbeContext) -> Observations:
    """Analyse every training log in ``ctx``; facts come from the log with the worst instability."""
    from ..report import timeline as T

    obs = Observations()
    logs, folder_saves = _logs_of(ctx)
    readings: list[Reading] = []
    for path, fmt in logs:
        try:
            s = analyse(path, None if fmt == "found" else fmt)
        except ArtifactError as err:
            if "tensorboard" in err.problem:
                obs.find("logs.tensorboard_missing", "info", err.problem, path)
                continue
            if fmt == "found":  # found inside a folder, not named by the user: say so, go on
                obs.find("logs.unreadable", "warning", err.problem, path)
                continue
            raise
        rd = read(s, folder_saves)
        findings(rd, obs)
        readings.append(rd)
    if not readings:
        return obs
    facts(max(readings, key=lambda r: RANK.get(r.main.severity, 0) if r.main else -1), obs)
    lines = [line for rd in readings for line in T.timeline(rd)]
    plot = _plot(ctx.plot, readings, obs) if ctx.plot else None
    obs.attachments["logs"] = {"timeline": lines, "plot": plot}
    return obs


def _plot(out: str, readings: list[Reading], obs: Observations) -> str | None:
    from ..report import timeline as T

    written = None
    for k, rd in enumerate(readings):
        path = out if k == 0 else str(Path(out).with_stem(f"{Path(out).stem}-{k + 1}"))
        try:
            T.plot(rd, path)
        except ImportError:
            obs.find("logs.plot_missing", "info", "--plot needs matplotlib: pip install 'llmfix[plot]' "
                     "(or pip install matplotlib)", out)
            return None
        except (OSError, ValueError) as err:
            obs.find("logs.plot_failed", "warning", f"could not write the plot: {err}", path)
            continue
        written = written or path
        obs.find("logs.plot", "info", f"plot of {Path(rd.summary.path).name} written to {path}", path)
    return written
