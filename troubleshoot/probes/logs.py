"""Training-log probe: what happened in the run, when, and where to roll back to.

Every log among the artifacts (and the ``trainer_state.json`` / event files inside checkpoint
folders) is streamed once through ``logs_summary.analyse`` (bounded memory); ``logs_reading``
turns the resulting Summary into a Reading, which becomes findings (``logs_findings``), facts
(rules/_facts/logs.yaml, published here) and a terminal timeline. Sample, on the BLOOM-104B
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
records are *blips* - one bad batch - and are only counted. The rollback target is the last
checkpoint saved at or before the last healthy record before the *onset* of the instability,
where the earliest sign (grad norm, a loss scale falling for a while) counts, not the visible
spike.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import ArtifactError
from ..loaders.logs import DETAILS, find_logs_in
from ..observations import Observations
from . import ProbeContext
from .logs_findings import findings
from .logs_preference import judge
from .logs_reading import (Reading, is_blip, linked_explosion, loss_scale_severity, near_warmup, read, skip_stats,
                           warmup_end)
from .logs_stats import median
from .logs_summary import analyse
from .logs_trends import eval_rising, slowdown

SOURCE = "probe:logs"
RANK = {"error": 2, "warning": 1}  # severity of a log's main instability: the worst log gives the facts


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
    run_kind_facts([rd.summary for rd in readings], obs)
    lines = [line for rd in readings for line in T.timeline(rd)]
    plot = _plot(ctx.plot, readings, obs) if ctx.plot else None
    obs.attachments["logs"] = {"timeline": lines, "plot": plot}
    return obs


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


def _plot(out: str, readings: list[Reading], obs: Observations) -> str | None:
    """Draw one figure per log (``out``, then ``out-2`` ...); the path of the first one written."""
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


# ---------------------------------------------------------------------------------------------
# facts

def run_kind_facts(summaries: list, obs: Observations) -> None:
    """The zero-loss facts (from the log showing the pattern, else the first with a loss) and the
    preference facts (from the first log of a preference / RL run)."""
    with_loss = [s for s in summaries if s.zero.records]
    zero = next((s for s in with_loss if s.zero.pattern), with_loss[0] if with_loss else None)
    for name, value in (zero.zero.facts() if zero else {}).items():
        obs.fact(name, value, SOURCE, zero.path)
    pref = next((s for s in summaries if s.pref.seen), None)
    for v in judge(pref.pref) if pref else ():
        obs.fact(v.fact, v.value, SOURCE, pref.path)


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
        f("logs.plateau", rd.plateau() is not None)
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
        f("logs.checkpoint_interval", int(median([b - a for a, b in zip(s.saves, s.saves[1:])])))
    elif s.save_steps:
        f("logs.checkpoint_interval", s.save_steps)
    if len(s.vals) >= 4:
        f("logs.eval_loss_rising", eval_rising(s.vals, s.blocks) is not None)
    if s.fmt in ("megatron", "deepspeed", "nanogpt", "hf-stdout", "text"):
        f("logs.oom_phase", s.oom_phase or "none")
        kinds = {k for k, *_ in s.errors}
        system = next((k for k in ("lost-gpu", "nccl-timeout", "cuda-error", "storage") if k in kinds), None)
        f("logs.system_error", system or ("slowdown" if slowdown(s.blocks) else "none"))
