"""Training-log probe: what happened in the run, when, and where to roll back to.

For every log among the artifacts (and the ``trainer_state.json`` / event files inside checkpoint
folders) the records are streamed once through the detectors of ``logseries`` (bounded memory),
then turned into findings, facts (rules/_facts/logs.yaml) and a terminal timeline. A sample, for
the BLOOM-104B excerpt of seed 002 (01_megatron_bigscience.log)::

    01.log:3   logs.spike     error    loss spike at iteration 7010: 6.445 -> 11.42 (1.8x its
                                       level 6.445); not recovered by the end of the log (last
                                       7.155 at 7220, +11 %)
    01.log:3   logs.grad_norm_explosion warning  grad norm 9.826e+04 -> 2.196e+05 (2.2x) at 7010, at
                                       the same logged iteration as the loss spike
    01.log     logs.rollback  info     instability began at 7010 (last good record 7000); skip
                                       --skip-train-iteration-range 7001-7200 ...

How to read it: *onset* is the first logged iteration that left the baseline (the logged
iteration N covers the steps after the previous logged one), the *peak* is the worst value, and
"recovered" means the series came back to within RECOVER_REL of its pre-event level. The
rollback target is the last checkpoint saved at or before the last normal record preceding the
*onset* of the instability (the earliest sign: grad norm or loss scale may precede the loss).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ArtifactError
from ..loaders.logs import DETAILS, Record, detect_format, find_logs_in, iter_records
from ..observations import Observations
from . import ProbeContext
from . import logseries as S

SOURCE = "probe:logs"
GAP_FACTOR = 5            # an iteration jump > 5 logging intervals is a gap in the log
SKIP_MIN_SPAN = 200       # a data-skip window covers at least this many iterations (GLM: 200)
AFTER_WARMUP_FACTOR = 2.0  # "near the end of warmup": onset within 2x the warmup length after it
BEFORE_WARMUP_FRACTION = 0.25  # ... or in the last quarter of the warmup itself
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
    loss: S.SpikeDetector = field(default_factory=lambda: S.SpikeDetector("spike"))
    gn: S.SpikeDetector = field(default_factory=lambda: S.SpikeDetector("explosion", log_space=True))
    ls: S.LossScaleTracker = field(default_factory=S.LossScaleTracker)
    lr: S.LRTracker = field(default_factory=S.LRTracker)
    blocks: S.Blocks = field(default_factory=S.Blocks)


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
            if len(s.saves) < MAX_SAVES and r.iteration is not None and r.iteration not in s.saves[-3:]:
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
        if s.last_it is not None:
            if it == s.last_it:
                return  # the same line printed by several ranks
            if it < s.last_it:
                s.restarts.append((s.last_it, it, r.line))
                s.loss.restart()
                s.gn.restart()
                self._last_gn = None
            elif len(self._diffs) < 16:
                self._diffs.append(it - s.last_it)
                s.interval = int(S.median(self._diffs))
            elif s.interval and it - s.last_it > GAP_FACTOR * s.interval:
                gap = True
            if gap and it > s.last_it and len(s.gaps) < MAX_ERRORS:
                s.gaps.append((s.last_it, it, r.line))
        self._gap_next, self._phase = False, "train"
        s.records += 1
        s.first_it = it if s.first_it is None else s.first_it
        s.last_it = it
        # a step skipped for overflow repeats the previous grad norm; 0.000 means "not measured"
        n_over, n_reduce, over_scale = self._pending_overflow
        skipped = max(r.skipped or 0, n_over, n_reduce if not n_over else 0)
        self._pending_overflow = [0, 0, None]
        scale = r.loss_scale if r.loss_scale is not None else over_scale
        gn = r.grad_norm
        if gn is not None and (gn == 0.0 or gn == self._last_gn or skipped):
            self._last_gn, gn = gn, None
        else:
            self._last_gn = gn
        lr = r.lr
        if lr is None and self._ds_lr is not None and self._ds_lr[0] == it:
            lr = self._ds_lr[1]
        s.ls.update(it, scale, skipped, r.line)
        s.lr.update(it, lr, r.line)
        loss = r.loss
        bad = (loss is not None and not math.isfinite(loss)) or (r.nan_count or 0) > 0 \
            or (gn is not None and not math.isfinite(gn) and scale is None)
        if bad:
            first = s.nan or (it, r.line, 0)
            s.nan = (first[0], first[1], first[2] + 1)
        if loss is not None and math.isfinite(loss):
            s.first_loss = loss if s.first_loss is None else s.first_loss
            s.last_loss, s.min_loss = loss, min(s.min_loss, loss)
            s.last_finite = (it, loss)
            ev = s.loss.update(it, loss, r.line, gap)
            if ev is not None and s.ls.drop_start is not None and s.ls.drop_start < ev.onset:
                ev.ls_drop_start, ev.ls_drop_factor = s.ls.drop_start, s.ls.factor_now()
        if gn is not None and math.isfinite(gn):
            s.gn.update(it, gn, r.line, gap)
        secs = r.seconds / r.batch if r.seconds and r.batch else r.seconds
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


# ---------------------------------------------------------------------------------------------
# from a Summary to findings and facts

def checkpoint_iterations(folder: Path) -> list[int]:
    """Iterations of the checkpoints in a run folder (or beside a checkpoint folder), by name only:
    ``global_stepN``, ``iter_000N``, ``checkpoint-N``, and what ``latest`` files point at."""
    out: set[int] = set()
    candidates = [folder] + ([folder.parent] if re.search(r"global_step|iter_|checkpoint-", folder.name) else [])
    for root in candidates:
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


def _where(s: Summary, line: int | None) -> str:
    if not line:
        return s.path
    if s.fmt == "trainer-state":
        return f"{s.path}:log_history[{line - 1}]"
    return f"{s.path}:{line}"


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:.4g}"


@dataclass
class Instability:
    what: str            # spike | divergence | nan | loss-scale
    severity: str
    onset: int
    bound: int           # last iteration known to be healthy (rollback at or before it)
    window: tuple[int, int]
    event: S.Event | None = None


def instabilities(s: Summary) -> list[Instability]:
    """Error- and warning-level instabilities, earliest first."""
    out = []
    iv = s.interval or 1
    for ev in s.loss.events:
        sev = "warning" if ev.recovered else "error"
        bound = ev.onset_prev if ev.onset_prev is not None else ev.onset - iv
        start = bound + 1
        out.append(Instability(ev.kind, sev, ev.onset, bound,
                               (start, max(ev.end or ev.peak_it, start + SKIP_MIN_SPAN - 1)), ev))
    d = S.drift(s.blocks)
    if d and not any(not i.event.recovered and i.onset <= d.onset + iv * s.blocks.size for i in out):
        out.append(Instability("divergence", "error", d.onset, d.onset - iv,
                               (d.onset - iv + 1, d.onset - iv + SKIP_MIN_SPAN)))
    if s.nan:
        bound = s.last_finite[0] if s.last_finite and s.last_finite[0] < s.nan[0] else s.nan[0] - iv
        out.append(Instability("nan", "error", s.nan[0], bound, (bound + 1, bound + SKIP_MIN_SPAN)))
    return sorted(out, key=lambda i: (i.onset, i.severity != "error"))


def primary(insts: list[Instability]) -> Instability | None:
    errors = [i for i in insts if i.severity == "error"]
    if errors:
        return errors[0]
    spikes = [i for i in insts if i.event is not None]
    return max(spikes, key=lambda i: i.event.ratio) if spikes else None


def early_onset(s: Summary, inst: Instability) -> tuple[int, str] | None:
    """The earliest sign before the visible instability: a falling loss scale or a rising grad-norm
    level, when it began at least EARLY_MIN_RECORDS logged records before the onset."""
    lead = S.EARLY_MIN_RECORDS * (s.interval or 1)
    ev = inst.event
    if ev is not None and ev.ls_drop_start is not None and ev.ls_drop_factor >= S.EARLY_LS_FACTOR \
            and ev.ls_drop_start <= inst.onset - lead:
        return ev.ls_drop_start, f"loss scale falling since {ev.ls_drop_start} ({ev.ls_drop_factor:.0f}x down)"
    trend = S.gn_trend(s.blocks, inst.onset)
    if trend and trend[0] <= inst.onset - max(lead, s.blocks.size * (s.interval or 1) * 2):
        return trend[0], f"grad-norm level rising since {trend[0]} ({trend[1]:.1f}x its minimum)"
    return None


def linked_explosion(s: Summary, inst: Instability) -> S.Event | None:
    """The grad-norm explosion that began shortly before (or with) the loss event."""
    if inst.event is None:
        return None
    iv = s.interval or 1
    near = [g for g in s.gn.events
            if inst.onset - S.LOOKBACK * iv <= g.onset <= inst.event.peak_it]
    return min(near, key=lambda g: g.onset) if near else None


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
    def skip_range(self) -> str | None:
        return f"{self.main.window[0]}-{self.main.window[1]}" if self.main else None

    @property
    def onset(self) -> int | None:
        if self.main is None:
            return None
        return min(self.main.onset, self.early[0]) if self.early else self.main.onset


def read(s: Summary, folder_saves: list[int]) -> Reading:
    insts = instabilities(s)
    main = primary(insts)
    early = early_onset(s, main) if main else None
    rollback = None
    if main:
        g = linked_explosion(s, main)
        if g is not None and g.onset < main.onset:
            main.onset, main.bound = g.onset, g.onset_prev if g.onset_prev is not None else g.onset - 1
        bound = main.bound if not early else min(main.bound, early[0] - 1)
        logged = [x for x in s.saves if x <= bound]
        named = [x for x in folder_saves if x <= bound]
        if logged or named:
            best = max(logged + named)
            rollback = (best, "a 'saving checkpoint' line in the log" if best in logged
                        else "the checkpoint folders given alongside")
        elif s.save_steps and bound >= s.save_steps:
            rollback = (bound // s.save_steps * s.save_steps,
                        f"save_steps={s.save_steps} in trainer_state.json (check that it still exists)")
    marks = [(ev.onset, "^" if ev.kind == "spike" else "D", f"loss {ev.kind}") for ev in s.loss.events]
    marks += [(g.onset, "G", "grad-norm explosion") for g in s.gn.events]
    if s.nan:
        marks.append((s.nan[0], "N", "NaN"))
    if s.ls.worst and s.ls.worst[0] >= S.LS_COLLAPSE_FACTOR:
        marks.append((s.ls.worst[1], "L", "loss-scale collapse"))
    if s.lr.warmup_end is not None:
        marks.append((s.lr.warmup_end, "W", "warmup end"))
    if early:
        marks.append((early[0], "E", "early warning"))
    if rollback:
        marks.append((rollback[0], "R", "rollback"))
    return Reading(s, insts, main, early, rollback, marks)


def _pct(new: float, old: float) -> str:
    return f"{(new / old - 1) * 100:+.0f} %" if old else "?"


def _near_warmup(s: Summary, onset: int) -> bool | None:
    w = s.lr.warmup_end
    if w is None:
        return None
    return w - BEFORE_WARMUP_FRACTION * w <= onset <= w + AFTER_WARMUP_FACTOR * max(w, 1)


def findings(rd: Reading, obs: Observations) -> None:
    s = rd.summary
    iv = s.interval or 1
    w = lambda line: _where(s, line)  # noqa: E731
    span = f"iterations {s.first_it}-{s.last_it}" if s.records else "no training records"
    extra = f", logged every {s.interval}" if s.interval else ""
    loss = (f"; loss {_g(s.first_loss)} -> {_g(s.last_loss)} (min {_g(s.min_loss)})"
            if s.first_loss is not None else "")
    obs.find("logs.summary", "info", f"parsed {s.records} training records ({DETAILS[s.fmt]}), "
             f"{span}{extra}{loss}", s.path,
             {"format": s.fmt, "records": s.records, "first": s.first_it, "last": s.last_it})
    if s.truncated:
        obs.find("logs.truncated", "warning", f"log cut short ({s.truncated}); the {s.records} records "
                 "before that were analysed", s.path)
    if s.nan:
        it, line, n = s.nan
        last = f"; last finite loss {_g(s.last_finite[1])} at {s.last_finite[0]}" if s.last_finite else ""
        obs.find("logs.nan", "error", f"loss became NaN/Inf at iteration {it} ({n} record(s) with "
                 f"NaN/Inf or nan iterations){last}", w(line), {"iteration": it, "records": n})
    for ev in s.loss.events:
        _loss_finding(s, ev, obs)
    if s.loss.dropped:
        obs.find("logs.spike", "info", f"{s.loss.dropped} further loss events not listed", s.path)
    d = next((i for i in rd.insts if i.what == "divergence" and i.event is None), None)
    if d:
        dr = S.drift(s.blocks)
        obs.find("logs.divergence", "error", f"loss diverging slowly since about iteration {d.onset}: "
                 f"smoothed loss {_g(dr.minimum)} at {dr.min_it} -> {_g(dr.final)} at the end "
                 f"({_pct(dr.final, dr.minimum)}), without a single spike", s.path,
                 {"onset": d.onset, "min": dr.minimum, "final": dr.final})
    for g in s.gn.events[:10]:
        _gn_finding(s, g, obs)
    _loss_scale_findings(s, obs)
    _lr_findings(rd, obs)
    if rd.main:
        m = rd.main
        if rd.early:
            obs.find("logs.early_warning", "warning", f"early warning: {rd.early[1]}, "
                     f"{m.onset - rd.early[0]} iterations before the {m.what} at {m.onset}", s.path,
                     {"onset": rd.early[0], "visible": m.onset})
        target = (f"roll back to iteration {rd.rollback[0]} (from {rd.rollback[1]})" if rd.rollback
                  else "no checkpoint before it is known: give the checkpoint folder alongside the log")
        obs.find("logs.rollback", "info", f"instability began at {rd.onset} (last healthy record "
                 f"{min(m.bound, rd.onset - 1)}); {target}; data window to skip: "
                 f"--skip-train-iteration-range {rd.skip_range}", s.path,
                 {"onset": rd.onset, "rollback": rd.rollback[0] if rd.rollback else None,
                  "skip_range": rd.skip_range})
    p = S.plateau(s.blocks, s.records)
    if p:
        stuck = s.first_loss is not None and p[1] >= 0.9 * s.first_loss
        obs.find("logs.plateau", "warning" if stuck else "info",
                 f"loss flat since about iteration {p[0]} at {_g(p[1])}"
                 + (" - barely below the first logged loss" if stuck else " (converged or LR too low)"),
                 s.path, {"since": p[0], "level": p[1]})
    e = S.eval_rising(s.vals, s.blocks)
    if e:
        obs.find("logs.eval_loss_rising", "warning", f"validation loss rising since iteration {e[0]}: "
                 f"{_g(e[1])} -> {_g(e[3])} at {e[2]}" + (" while the training loss keeps falling"
                                                         if e[4] else ""), s.path)
    sd = S.slowdown(s.blocks)
    if sd:
        obs.find("logs.slowdown", "warning", f"iterations {sd[1]:.1f}x slower per sample since about "
                 f"{sd[0]} than over the run (a slow node, throttling or I/O?)", s.path)
    for kind, it, line, text in s.errors:
        sev = "info" if kind == "cancelled" else "warning" if kind == "exception" else "error"
        fid = "logs.oom" if kind == "oom" else "logs.exception" if kind == "exception" else "logs.system_error"
        phase = f" during {s.oom_phase}" if kind == "oom" else ""
        at = f" after iteration {it}" if it is not None else ""
        obs.find(fid, sev, f"{kind}{phase}{at}: {text[:200]}", w(line))
    if s.gaps:
        text = ", ".join(f"{a}-{b}" for a, b, _ in s.gaps[:5])
        obs.find("logs.gap", "info", f"the log skips iterations between {text}: events inside "
                 "a gap cannot be located", w(s.gaps[0][2]))
    for a, b, line in s.restarts[:5]:
        obs.find("logs.restart", "info", f"the log goes back from iteration {a} to {b} "
                 "(a resume from a checkpoint, or several runs in one file)", w(line))


def _loss_finding(s: Summary, ev: S.Event, obs: Observations) -> None:
    what = "loss spike" if ev.kind == "spike" else "loss rising"
    msg = f"{what} at iteration {ev.start}: {_g(ev.level)} -> {_g(ev.peak)} ({ev.ratio:.2g}x its level)"
    if ev.peak_it != ev.start:
        msg += f", peak at {ev.peak_it}"
    if ev.onset != ev.start:
        msg += f"; the rise began at {ev.onset}"
    if ev.across_gap:
        msg += "; the rise happened inside a gap of the log"
    if ev.recovered:
        msg += f"; recovered by {ev.end} ({ev.end - ev.onset} iterations)"
    elif ev.settled is not None and ev.end is None and ev.records >= S.SETTLE_RECORDS:
        msg += f"; did not recover: settled at {_g(ev.settled)} ({_pct(ev.settled, ev.level)})"
    else:
        falling = " and falling" if ev.last is not None and ev.last < ev.peak * 0.9 else ""
        msg += (f"; not recovered by the end of the log (last {_g(ev.last)}, "
                f"{_pct(ev.last or ev.peak, ev.level)}{falling})")
    near = _near_warmup(s, ev.onset)
    if near:
        msg += f"; near the end of LR warmup ({s.lr.warmup_end})"
    fid = "logs.spike" if ev.kind == "spike" else "logs.divergence"
    obs.find(fid, "warning" if ev.recovered else "error", msg, _where(s, ev.line),
             {"onset": ev.onset, "start": ev.start, "peak_iteration": ev.peak_it, "peak": ev.peak,
              "level": ev.level, "recovered": ev.recovered, "end": ev.end})


def _gn_finding(s: Summary, g: S.Event, obs: Observations) -> None:
    msg = f"grad norm exploded at iteration {g.start}: {_g(g.level)} -> {_g(g.peak)} ({g.ratio:.3g}x)"
    if g.peak_it != g.start:
        msg += f", peak at {g.peak_it}"
    msg += f"; back to normal by {g.end}" if g.recovered else "; still high at the end of the log"
    iv = s.interval or 1
    spike = next((ev for ev in s.loss.events if g.onset <= ev.onset <= g.onset + S.LOOKBACK * iv
                  or ev.onset <= g.onset <= ev.peak_it), None)
    if spike:
        lead = spike.onset - g.onset
        msg += (f"; {lead} iterations before the loss left its level at {spike.onset}" if lead > 0
                else "; at the same logged iteration as the loss" if lead == 0
                else f"; {-lead} iterations after the loss began rising")
    obs.find("logs.grad_norm_explosion", "warning", msg, _where(s, g.line),
             {"onset": g.onset, "peak": g.peak, "level": g.level, "recovered": g.recovered})


def skip_stats(s: Summary) -> tuple[int, int, float]:
    """(skipped after start-up, iterations after start-up, fraction)."""
    ls = s.ls
    after = max(ls.skips, s.ds_skipped - ls.startup_skips)
    start = ls.calibrated_at if ls.calibrated_at is not None else s.first_it or 0
    n = max(1, (s.last_it or 0) - start)
    return after, n, after / n


def loss_scale_severity(s: Summary) -> str | None:
    ls = s.ls
    skipped, n, frac = skip_stats(s)
    if (ls.seen and ls.min <= S.LS_MIN_SCALE) or (frac >= S.SKIP_ERROR_FRACTION and skipped >= 3):
        return "error"
    if (ls.worst and ls.worst[0] >= S.LS_COLLAPSE_FACTOR) or (frac >= S.SKIP_WARN_FRACTION and skipped >= 3):
        return "warning"
    return None


def _loss_scale_findings(s: Summary, obs: Observations) -> None:
    ls = s.ls
    if ls.startup_skips:
        obs.find("logs.loss_scale_startup", "info", f"{ls.startup_skips} iterations skipped while the "
                 f"fp16 loss scale searched its start value (normal), settled by {ls.calibrated_at}", s.path)
    sev = loss_scale_severity(s)
    if not sev:
        return
    skipped, n, frac = skip_stats(s)
    parts = []
    if ls.worst:
        factor, start, line, scale, at = ls.worst
        parts.append(f"loss scale fell {factor:.0f}x ({_g(scale * factor)} -> {_g(scale)}) from {start} to {at}")
    if ls.seen and ls.min <= S.LS_MIN_SCALE:
        parts.append(f"pinned at the minimum {_g(ls.min)}")
    parts.append(f"{skipped} of {n} iterations skipped for overflow after start-up ({frac:.0%})")
    obs.find("logs.loss_scale_collapse", sev, "; ".join(parts),
             _where(s, ls.worst[2] if ls.worst else None),
             {"skipped": skipped, "fraction": round(frac, 4), "min_scale": ls.min if ls.seen else None})


def _lr_findings(rd: Reading, obs: Observations) -> None:
    s = rd.summary
    lr = s.lr
    if lr.warmup_end is not None:
        msg = f"LR warmup ended at iteration {lr.warmup_end} (peak LR {lr.peak:.3g})"
        if rd.main is not None:
            d = rd.main.onset - lr.warmup_end
            rel = f"{d} iterations after" if d >= 0 else f"{-d} iterations before"
            msg += f"; the {rd.main.what} began {rel} it"
        obs.find("logs.warmup_end", "info", msg, _where(s, lr.peak_line), {"iteration": lr.warmup_end})
    elif lr.still_warming:
        obs.find("logs.warmup_end", "info", f"LR still rising at the end of the log ({lr.peak:.3g} at "
                 f"{lr.peak_it}): warmup not finished", s.path)


def facts(rd: Reading, obs: Observations) -> None:
    """Publish rules/_facts/logs.yaml facts that this log determines (never guesses)."""
    s = rd.summary
    f = lambda name, value, note="": obs.fact(name, value, SOURCE, note or s.path)  # noqa: E731
    iv = s.interval or 1
    f("logs.last_iteration", s.last_it) if s.last_it is not None else None
    if s.first_loss is not None and s.first_it is not None and s.first_it <= 2 * iv + 1:
        f("logs.initial_loss", s.first_loss)
    if s.lr.peak:
        f("logs.lr_peak", s.lr.peak)
    if s.lr.warmup_end is not None:
        f("logs.warmup_end_iteration", s.lr.warmup_end)
    f("logs.nan", s.nan is not None)
    if s.nan:
        f("logs.nan_iteration", s.nan[0])
        w = s.lr.warmup_end
        f("logs.nan_early", s.nan[0] - (s.first_it or 0) < 100 * iv if s.first_it is not None
          and s.first_it <= 2 * iv + 1 else bool(w is not None and s.nan[0] <= w))
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
        f("logs.plateau", S.plateau(s.blocks, s.records) is not None)
    if any(g == g for g in s.blocks.gn):
        f("logs.grad_norm_explosion", bool(s.gn.events))
    if s.ls.seen or s.overflow_lines or s.ds_skipped:
        skipped, _, _ = skip_stats(s)
        f("logs.loss_scale_collapse", loss_scale_severity(s) is not None)
        f("logs.skipped_iterations", skipped)
        if s.ls.seen:
            f("logs.loss_scale_min", s.ls.min)
    if rd.main:
        f("logs.early_warning", rd.early is not None)
        f("logs.instability_onset", rd.onset)
        f("logs.skip_range", rd.skip_range)
        near = _near_warmup(s, rd.onset)
        if near is not None:
            f("logs.spike_after_warmup", near)
        if rd.rollback:
            f("logs.rollback_iteration", rd.rollback[0], f"{s.path}: {rd.rollback[1]}")
        g = linked_explosion(s, rd.main)
        if g is not None and rd.main.event is not None:
            f("logs.grad_norm_lead", max(0, rd.main.event.onset - g.onset))
    if len(s.saves) >= 2:
        f("logs.checkpoint_interval", int(S.median([b - a for a, b in zip(s.saves, s.saves[1:])])))
    elif s.save_steps:
        f("logs.checkpoint_interval", s.save_steps)
    if len(s.vals) >= 4:
        f("logs.eval_loss_rising", S.eval_rising(s.vals, s.blocks) is not None)
    if s.fmt in ("megatron", "deepspeed", "nanogpt", "hf-stdout", "text"):
        f("logs.oom_phase", s.oom_phase or "none")
        kinds = [k for k, *_ in s.errors]
        system = next((k for k in ("lost-gpu", "nccl-timeout", "cuda-error", "storage") if k in kinds), None)
        f("logs.system_error", system or ("slowdown" if S.slowdown(s.blocks) else "none"))


# ---------------------------------------------------------------------------------------------
# the probe

def _logs_of(ctx: ProbeContext) -> tuple[list[tuple[str, str | None]], list[int]]:
    """(log paths with known format, checkpoint iterations named by the folders given)."""
    logs: list[tuple[str, str | None]] = []
    saves: list[int] = []
    seen: set[str] = set()
    for a in ctx.artifacts:
        p = Path(a.path)
        if a.kind == "log":
            fmt = next((k for k, v in DETAILS.items() if v == a.detail), None)
            if str(p.resolve()) not in seen:
                seen.add(str(p.resolve()))
                logs.append((a.path, fmt))
        elif p.is_dir():
            saves.extend(checkpoint_iterations(p))
            for q in find_logs_in(p):
                if str(q.resolve()) not in seen:
                    seen.add(str(q.resolve()))
                    logs.append((str(q), None))
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
            s = analyse(path, fmt)
        except ArtifactError as err:
            if "tensorboard" in err.problem:
                obs.find("logs.tensorboard_missing", "info", err.problem, path)
                continue
            if fmt is None:  # found inside a folder, not given by the user: report, go on
                obs.find("logs.unreadable", "warning", err.problem, path)
                continue
            raise
        rd = read(s, folder_saves)
        findings(rd, obs)
        readings.append(rd)
    if not readings:
        return obs
    best = max(readings, key=lambda r: RANK.get(r.main.severity, 0) if r.main else -1)
    facts(best, obs)
    lines: list[str] = []
    for rd in readings:
        lines.extend(T.timeline(rd))
    plot = None
    if ctx.plot:
        plot = _plot(ctx.plot, readings, obs)
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
