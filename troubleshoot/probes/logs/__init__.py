"""Training-log probe: what happened in the run, when, and where to roll back to.

Every log among the artifacts (and the ``trainer_state.json`` / event files inside checkpoint
folders) is streamed once through ``summary.analyse`` (bounded memory); ``reading`` turns the
resulting Summary into a Reading, which becomes findings (``findings``), facts
(rules/_facts/logs.yaml, published here) and a ``Timeline`` for the renderers. Sample, on the BLOOM-104B
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

from ...errors import ArtifactError
from ...loaders.logs import FOLDER, find_logs_in, formats
from ...observations import Observations, Timeline
from ..context import ProbeContext
from .findings import findings
from .preference import judge
from .reading import Reading, is_blip, linked_explosion, loss_scale_severity, near_warmup, read, skip_stats, warmup_end
from .stats import median
from .summary import analyse
from .trends import eval_rising, slowdown

SOURCE = "probe:logs"
# Every fact this family can publish (kb lint checks them against the rules' facts).
PUBLISHES = (
    "logs.last_iteration", "logs.initial_loss", "logs.lr_peak", "logs.warmup_end_iteration", "logs.nan",
    "logs.nan_iteration", "logs.nan_early", "logs.spike", "logs.spike_iteration",
    "logs.spike_recovered", "logs.recovery_iterations", "logs.divergence", "logs.plateau",
    "logs.grad_norm_explosion", "logs.loss_scale_collapse", "logs.skipped_iterations",
    "logs.loss_scale_min", "logs.early_warning", "logs.instability_onset", "logs.skip_range",
    "logs.spike_after_warmup", "logs.rollback_iteration", "logs.grad_norm_lead",
    "logs.checkpoint_interval", "logs.eval_loss_rising", "logs.oom_phase", "logs.system_error",
    # zeroloss.py: a logged loss of exactly 0
    "logs.loss_zero", "logs.loss_zero_grad_nan", "logs.loss_zero_from_start",
    # preference.py: TRL-style preference / RL metrics
    "logs.pref.rewards_both_falling", "logs.pref.chosen_logps_falling", "logs.pref.margin_runaway",
    "logs.pref.loss_collapsed", "logs.pref.loss_stuck", "logs.pref.initial_rewards_nonzero",
    "logs.pref.accuracy_final", "logs.pref.kl_negative", "logs.pref.kl_exploding", "logs.pref.clipfrac_high",
    "logs.pref.length_growing",
)
RANK = {"error": 2, "warning": 1}  # severity of a log's main instability: the worst log gives the facts


def run(ctx: ProbeContext) -> Observations:
    """Analyse every training log in ``ctx``; facts come from the log with the worst instability."""
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
            if fmt is None:  # found inside a folder, not named by the user: say so, go on
                obs.find("logs.unreadable", "warning", err.problem, path)
                continue
            raise
        rd = read(s, folder_saves)
        findings(rd, obs)
        readings.append(rd)
    if not readings:
        told = any(f.id == "logs.tensorboard_missing" for f in obs.findings)  # it says what to install
        if any(a.kind == "log" for a in ctx.artifacts) and not told:  # logs given, none readable
            obs.find("logs.nothing_read", "error", "no log in this folder could be read: give the log your "
                     "trainer printed, its JSONL metrics or trainer_state.json", ctx.artifacts[0].path)
        return obs
    facts(max(readings, key=lambda r: RANK.get(r.main.severity, 0) if r.main else -1), obs)
    run_kind_facts([rd.summary for rd in readings], obs)
    obs.attachments["logs"] = {"timelines": [timeline(rd) for rd in readings]}
    return obs


def _logs_of(ctx: ProbeContext) -> tuple[list[tuple[str, str | None]], list[int]]:
    """(log paths with the format their loader recognised, None for logs found inside folders;
    checkpoint iterations named by the folders given)."""
    logs: list[tuple[str, str | None]] = []
    saves: list[int] = []
    seen: set[str] = set()
    for a in ctx.artifacts:
        p = Path(a.path)
        if a.kind == "log" and a.format != FOLDER:
            key = str(p.resolve())
            if key not in seen:
                seen.add(key)
                logs.append((a.path, a.format or None))
        elif p.is_dir():
            saves.extend(checkpoint_iterations(p))
            for q in find_logs_in(p):
                if str(q.resolve()) not in seen:
                    seen.add(str(q.resolve()))
                    logs.append((str(q), None))
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


def timeline(rd: Reading) -> Timeline:
    """The series and events of one log, as plain data for the terminal timeline and --plot."""
    s, b = rd.summary, rd.summary.blocks
    return Timeline(s.path, s.records, list(b.it), list(b.loss), list(b.loss_lo), list(b.loss_hi), list(b.gn),
                    list(b.ls), list(b.lr), s.ls.seen, list(s.vals), list(rd.markers),
                    rd.main.window if rd.main else None)


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
    if s.records or s.nan:  # a log without training records cannot say the loss stayed finite
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
    if formats.get(s.fmt).error_lines:
        f("logs.oom_phase", s.oom_phase or "none")
        kinds = {k for k, *_ in s.errors}
        system = next((k for k in ("lost-gpu", "nccl-timeout", "cuda-error", "storage") if k in kinds), None)
        f("logs.system_error", system or ("slowdown" if slowdown(s.blocks) else "none"))
