"""The findings of the log probe: one Reading becomes lines a person reads (``where  id  message``).

Messages say what happened, at which iteration, and how it ended (recovered by N, settled at X,
still open at the end of the log); severities follow docs/log-analysis.md ("Severity"). Warning-
level spikes and explosions beyond ``MAX_LISTED`` and single-batch blips are counted in one info
finding each.
"""
from __future__ import annotations

from pathlib import Path

from ...loaders.logs import formats
from ...observations import Observations
from . import trends
from .detectors import SETTLE_RECORDS, Event
from .preference import judge
from .reading import (
    BLIP_RECORDS,
    Reading,
    is_blip,
    loss_event_near,
    loss_scale_severity,
    near_warmup,
    skip_stats,
    warmup_end,
)
from .summary import Summary
from .trackers import LS_MIN_SCALE

MAX_LISTED = 10           # warning-level spikes / explosions listed one by one (errors: all)
ERROR_IDS = {"oom": "logs.oom", "exception": "logs.exception", "cancelled": "logs.job_end"}


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:.4g}"


def _pct(new: float, old: float) -> str:
    return f"{(new / old - 1) * 100:+.0f} %" if old else "?"


def _its(n: int) -> str:
    return f"{n} iteration" + ("" if n == 1 else "s")


def _where(s: Summary, line: int | None) -> str:
    """``path:line`` (``path:log_history[i]`` for a trainer_state.json); the path alone without a line."""
    if not line:
        return s.path
    return f"{s.path}:log_history[{line - 1}]" if s.fmt == "trainer-state" else f"{s.path}:{line}"


def findings(rd: Reading, obs: Observations) -> None:
    """Every finding of one log, in reading order: what was parsed, the instabilities, the loss
    scale and LR, the rollback plan, the slow trends, then system errors and the log's own gaps."""
    s = rd.summary
    _summary_findings(s, obs)
    _event_findings(s, s.loss.events, "loss", obs)
    d = next((i for i in rd.insts if i.what == "divergence" and i.event is None), None)
    if d:
        dr = trends.drift(s.blocks)
        obs.find("logs.divergence", "error", f"loss diverging slowly since about iteration {d.onset}: "
                 f"smoothed loss {_g(dr.minimum)} at {dr.min_it} -> {_g(dr.final)} at the end "
                 f"({_pct(dr.final, dr.minimum)}), without a single spike", s.path,
                 {"onset": d.onset, "min": dr.minimum, "final": dr.final})
    _event_findings(s, s.gn.events, "grad norm", obs)
    _loss_scale_findings(s, obs)
    _lr_finding(rd, obs)
    if rd.main:
        _rollback_findings(rd, obs)
    _trend_findings(rd, obs)
    _zero_and_preference_findings(s, obs)
    _log_findings(s, obs)


def _zero_and_preference_findings(s: Summary, obs: Observations) -> None:
    """A loss of exactly 0, and what a preference / RL run's own metrics show (preference.py)."""
    zero = s.zero.message()
    if zero:
        obs.find("logs.zero_loss", "error", zero, s.path,
                 {"zeros": s.zero.zeros, "records": s.zero.records, "grad_nan": s.zero.zeros_grad_nan})
    for v in judge(s.pref):
        if v.finding:
            fid, severity, message = v.finding
            obs.find(fid, severity, message, s.path)


def _summary_findings(s: Summary, obs: Observations) -> None:
    """What was parsed, whether the log was cut short, and the first NaN/Inf."""
    span = f"iterations {s.first_it}-{s.last_it}" if s.records else "no training records"
    every = f", logged every {s.interval}" if s.interval else ""
    loss = f"; loss {_g(s.first_loss)} -> {_g(s.last_loss)} (min {_g(s.min_loss)})" \
        if s.first_loss is not None else ""
    obs.find("logs.summary", "info", f"parsed {s.records} training records ({formats.get(s.fmt).detail}), "
             f"{span}{every}{loss}", s.path,
             {"format": s.fmt, "records": s.records, "first": s.first_it, "last": s.last_it})
    if not s.records or s.first_loss is None and s.nan is None and not s.vals:
        what = "no training records" if not s.records else f"{s.records} records but no loss value"
        obs.find("logs.nothing_read", "error", f"{what} could be read from {Path(s.path).name}: "
                 "give the log your trainer printed (a line per step with the loss), its JSONL metrics or "
                 "trainer_state.json", s.path)
    if s.truncated:
        obs.find("logs.truncated", "warning", f"log cut short ({s.truncated}); the {s.records} "
                 "records before that were analysed", s.path)
    if s.nan:
        it, line, n = s.nan
        last = f"; last finite loss {_g(s.last_finite[1])} at {s.last_finite[0]}" if s.last_finite else ""
        obs.find("logs.nan", "error", f"loss became NaN/Inf at iteration {it} ({n} record(s) with "
                 f"NaN/Inf or nan iterations){last}", _where(s, line), {"iteration": it, "records": n})


def _trend_findings(rd: Reading, obs: Observations) -> None:
    """Plateau, validation loss rising, slowdown: read from the block summaries."""
    s = rd.summary
    p = rd.plateau()
    if p:
        stuck = s.first_loss is not None and p[1] >= 0.9 * s.first_loss
        obs.find("logs.plateau", "warning" if stuck else "info",
                 f"loss flat since about iteration {p[0]} at {_g(p[1])}"
                 + (", barely below the first logged loss" if stuck else " (converged, or the LR is too low)"),
                 s.path, {"since": p[0], "level": p[1]})
    e = trends.eval_rising(s.vals, s.blocks)
    if e:
        obs.find("logs.eval_loss_rising", "warning", f"validation loss rising since iteration {e[0]}: "
                 f"{_g(e[1])} -> {_g(e[3])} at {e[2]}"
                 + (" while the training loss keeps falling" if e[4] else ""), s.path)
    sd = trends.slowdown(s.blocks)
    if sd:
        obs.find("logs.slowdown", "warning", f"iterations {sd[1]:.1f}x slower per sample since about "
                 f"{sd[0]} than over the whole run (a slow node, throttling or I/O?)", s.path)


def _log_findings(s: Summary, obs: Observations) -> None:
    """System errors (one per kind for exceptions and cancellations), gaps and restarts."""
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
    """One finding per loss / grad-norm event (recovered ones up to MAX_LISTED); blips counted."""
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
                 f"level within {BLIP_RECORDS - 1} records; largest {big.ratio:.2g}x at {big.start}): batch-to-batch "
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
    elif ev.records >= SETTLE_RECORDS:
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
    spike = loss_event_near(s, g)
    if spike:
        lead = spike.onset - g.onset
        msg += (f"; {_its(lead)} before the loss left its level at {spike.onset}" if lead > 0
                else "; at the same logged iteration as the loss" if lead == 0
                else f"; {_its(-lead)} after the loss began rising")
    obs.find("logs.grad_norm_explosion", "warning", msg, _where(s, g.line),
             {"onset": g.onset, "peak": g.peak, "level": g.level, "recovered": g.recovered})


def _loss_scale_findings(s: Summary, obs: Observations) -> None:
    """The start-up search of the fp16 scaler (normal), and a collapse when there is one."""
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
    if ls.seen and ls.min <= LS_MIN_SCALE:
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
    """The early warning and the rollback plan of the main instability."""
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
