"""Incident-bundle probe: the facts a live guard caught at the failing step (docs/live-guard.md).

A bundle (``loaders/incident.py``) holds the offending batch and the recent metrics, which the
batch and log probes read as they would any batch or JSONL log, plus ``incident.json``, whose
facts this family publishes on top: what tripped, the replay's verdict (deterministic or
transient, the first module with a NaN/Inf output), non-finite gradients and weights, the run's
LR, precision and clipping. The guard diagnoses its bundle through this same probe, so
``llmfix probe BUNDLE`` later gives the diagnosis saved in ``diagnosis.json``. Sample::

    error    runs/x/llmfix-incidents/57  incident.trip    step 57: nonfinite-loss, nonfinite-grad
             (loss nan, grad norm nan)
    error    runs/x/llmfix-incidents/57  incident.replay  the step replays (deterministic): first
             NaN/Inf output in transformer.drop (Dropout); input abs-max nan, output abs-max nan
    warning  runs/x/llmfix-incidents/57  incident.nonfinite_grads  12 parameters have NaN/Inf
             gradients: transformer.wte.weight, ...

How to read it: a failure that replays on the same weights and batch is in the data, the weights
or the numerics; one that does not replay is transient (look at the hardware, Xid/ECC errors).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..loaders import batch as batch_loader
from ..loaders.incident import BATCH_GLOB, METRICS, read
from ..observations import Artifact, Observations

SOURCE = "probe:incident"
# Facts of the failing step itself. The bundle's batch and metrics go through the batch and log
# probes, which publish their own facts (logs.nan, logs.spike, data.labels.no_target, ...).
PUBLISHES = ("train.failure_iteration", "train.framework", "train.precision", "train.grad_clip", "train.lr",
             "live.lr_jump", "live.spike_follows_weights", "data.has_nonfinite", "weights.nonfinite",
             "weights.nonfinite_tensors", "grads.nonfinite", "nanloss.recurs_on_replay", "lossspike.replay_spikes")
NONFINITE = ("nonfinite-loss", "nonfinite-grad")
EXCEPTION_MATCH = 0.6   # an exception matching a symptom's error aliases this well shows that symptom
SYMPTOMS = {"nonfinite-loss": "nan-loss", "nonfinite-grad": "nan-loss", "no-target": "nan-loss",
            "loss-spike": "loss-spike", "grad-explosion": "loss-spike", "loss-scale-collapse": "fp16-overflow"}


def run(ctx) -> Observations:
    """Probe every incident bundle: its batch and metrics as usual, then incident.json."""
    from . import run_all

    obs = Observations()
    for art in ctx.of_kind("incident"):
        folder = Path(art.path)
        data = read(folder)
        obs.merge(run_all(replace(ctx, artifacts=_contents(folder))))
        publish(data, str(folder), obs)
    obs.artifacts = []
    return obs


def _contents(folder: Path) -> list[Artifact]:
    """The bundle's token batches and its metrics log, as the batch and log probes expect them."""
    arts = [a for a in (batch_loader.sniff(p) for p in sorted(folder.glob(BATCH_GLOB))) if a is not None]
    if (folder / METRICS).is_file():
        arts.append(Artifact(str(folder / METRICS), "log", "jsonl metrics"))
    return arts


def publish(data: dict, where: str, obs: Observations) -> None:
    """Findings and facts of one incident.json."""
    def fact(name, value, note=""):
        if value is not None:
            obs.fact(name, value, SOURCE, note or where)

    trips, values = data.get("trips") or [], data.get("values") or {}  # null: not measured
    step = data.get("step")
    ranks = data.get("ranks") or {}
    first = ranks.get("first") if (ranks.get("world") or 1) > 1 else None
    on_ranks = f"; first on rank {', '.join(map(str, first))}" if first else ""
    loss = values.get("loss", "none: the step raised")
    obs.find("incident.trip", "error", f"step {step}: {', '.join(trips)} (loss {loss}, "
             f"grad norm {values.get('grad_norm', 'not measured')}){on_ranks}", where, values)
    for trip in trips:
        if trip in SYMPTOMS:  # the guard saw it happen: the symptom is observed, not inferred
            obs.symptoms[SYMPTOMS[trip]] = 1.0
    fact("train.failure_iteration", step)
    fact("train.framework", data.get("framework"))
    fact("train.precision", data.get("precision"))
    fact("train.grad_clip", data.get("grad_clip"))
    if data.get("lr_jump"):  # a one-off jump is not the run's LR: the fixes compute from the level
        fact("train.lr", data.get("lr_level"), "median LR of the last steps (one update jumped above it)")
    else:
        fact("train.lr", data.get("lr_peak"), "largest LR the guard saw")
    fact("live.lr_jump", data.get("lr_jump"))
    if data.get("exception"):
        obs.find("incident.exception", "error", f"step {step} raised {data['exception']}", where)
        symptom = exception_symptom(data["exception"])
        if symptom:
            obs.symptoms[symptom] = 1.0
    _batches(data, where, fact)
    _weights_and_grads(data, where, obs, fact)
    _replay(data, trips, where, obs, fact)


def exception_symptom(text: str) -> str | None:
    """The symptom whose error aliases (rules/*.yaml ``errors:``) the exception matches clearly,
    e.g. "IndexError: index out of range in self" -> nan-loss; None for a weak or ambiguous match."""
    from ..knowledge import load
    from ..matcher import SymptomMatcher, pick

    matches, ambiguous = pick(SymptomMatcher(load()).match(text))
    return matches[0].id if matches and not ambiguous and matches[0].score >= EXCEPTION_MATCH else None


def _batches(data: dict, where: str, fact) -> None:
    batches = data.get("batches") or []
    bad = sorted({k for b in batches for k in b.get("nonfinite_keys", [])})
    if batches:
        fact("data.has_nonfinite", bool(bad), f"NaN/Inf in {', '.join(bad)}" if bad else "")


def _weights_and_grads(data: dict, where: str, obs: Observations, fact) -> None:
    weights, grads = data.get("nonfinite_weights"), data.get("nonfinite_grads")
    if weights is not None:
        fact("weights.nonfinite", bool(weights), ", ".join(weights[:6]))
        if weights:
            fact("weights.nonfinite_tensors", len(weights))
            obs.find("incident.nonfinite_weights", "error", f"{len(weights)} weight tensors hold NaN/Inf: "
                     f"{_names(weights)}", where, weights)
    if grads:
        obs.find("incident.nonfinite_grads", "warning", f"{len(grads)} parameters have NaN/Inf gradients at "
                 f"the failing step: {_names(grads)}", where, grads)


def _replay(data: dict, trips: list[str], where: str, obs: Observations, fact) -> None:
    rep = data.get("replay") or {}
    if not rep.get("ran"):
        obs.find("incident.replay", "info", f"the step was not replayed: {rep.get('why_not') or 'unknown'}", where)
        return
    reproduced = rep.get("reproduced")
    verdict = {True: "the step replays (deterministic)", False: "the step does not replay (transient)",
               None: "replayed"}[reproduced]
    if rep.get("error"):
        detail = f": {rep['error']}" + (f" in {rep['error_module']}" if rep.get("error_module") else "")
    else:
        fact("grads.nonfinite", bool(rep.get("grads_nonfinite")), ", ".join((rep.get("grads_nonfinite") or [])[:6]))
        detail = f"; replayed loss {rep.get('loss')}"
        if rep.get("first_module"):
            last = (rep.get("frames") or [{}])[-1]
            detail = (f": first NaN/Inf output in {rep['first_module']} ({rep.get('first_class') or '?'})"
                      + (f"; input abs-max {last.get('input_absmax')}, output abs-max {last.get('output_absmax')}"
                         if last else "") + detail)
    if rep.get("follows_weights") is not None:
        fact("live.spike_follows_weights", rep["follows_weights"],
             f"the previous step's batch gives loss {rep.get('previous_loss')} on the current weights")
        detail += f"; the previous step's batch now gives loss {rep.get('previous_loss')}"
    if reproduced is not None and not rep.get("follows_weights"):  # after a bad update, a replay on
        if any(t in trips for t in NONFINITE + ("exception",)):     # the same weights says nothing of the data
            fact("nanloss.recurs_on_replay", reproduced, "replay of the failing step on the same weights and batch")
        if "loss-spike" in trips and rep.get("follows_weights") is False:
            fact("lossspike.replay_spikes", reproduced, "replay of the spiking step on the same weights and batch")
    severity = "error" if reproduced else "warning" if reproduced is False else "info"
    obs.find("incident.replay", severity, verdict + detail, where, rep.get("frames"))


def _names(names: list[str], show: int = 6) -> str:
    return ", ".join(names[:show]) + (f" (+{len(names) - show} more)" if len(names) > show else "")
