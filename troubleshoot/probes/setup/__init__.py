"""Setup probe: the run's settings and errors from launch scripts, training scripts, trainer
configs and console output (troubleshoot/loaders/setup), as facts and findings.

Every setting that a fact's key rules name (precision, LR, warmup, clipping, Adam betas / eps,
batch and accumulation sizes, ZeRO stage, TP / PP sizes, init std, sequence length, LoRA rank and
alpha, attention kernel) is published with the line it was written on; code known to break
training becomes a finding; console output (and any text log) is searched for the error
signatures of rules/_signatures/, each a finding at its line. Sample::

    info     run.sh:14   setup.settings  7 settings read: train.precision = fp16 (--fp16),
                         train.lr = 0.0006 (--lr 6e-4), tp.size = 2 (--tensor-model-parallel-size 2), ...
    warning  train.py:31 setup.labels_unmasked  labels are a copy of input_ids and nothing sets -100 ...
    error    out.txt:212 signature.cuda_index_assert  A CUDA kernel read an embedding row past ...

Facts from a console paste are the weakest: the other probes run after this one and override them.
"""
from __future__ import annotations

from pathlib import Path

from ...evidence import extract
from ...evidence.keys import facts_from_settings
from ...knowledge import load
from ...loaders.setup import settings
from ...loaders.setup.read import read_console
from ...observations import Artifact, Observations
from .. import ProbeContext
from .derive import defaults, derive, framework_of, warmup_fraction
from .script import script_findings

# Besides these (derived from several settings, or from code patterns), it publishes the facts the
# knowledge reads from text: those with `keys:` / `text:` rules and those the error signatures set
# (kb lint checks them). None is a measurement: any probe overrides them (probes.WRITTEN).
PUBLISHES = ("data.collator_masks_pad", "data.eos.appended", "data.labels.pad_not_ignored",
             "export.peft_state_dict_override", "export.zero3_gathers_on_save",
             "fp16overflow.mask_fill_large", "fp16overflow.params_loaded_fp16", "mask.additive_fill_unsafe",
             "model.dtype", "model.pad_is_eos", "pref.reward_direction_inverted", "tp.size", "train.framework",
             "train.parallelism", "train.pp_size", "train.precision", "train.warmup_iterations",
             "train.warmup_ratio", "train.zero_stage")
SOURCE = "probe:setup"        # settings written down (engine.SETTINGS_SOURCE: they imply no symptom)
CONSOLE = "probe:console"     # errors and values read from console output
SCRIPT = "probe:script"       # code in a training script known to break training
STRUCTURED = ("launch-script", "training-script", "trainer-config")
TEXT_LOGS = ("plain text log", "megatron text log", "deepspeed text log", "nanogpt text log", "hf trainer stdout")


def run(ctx: ProbeContext) -> Observations:
    kb = load()
    obs = Observations()
    for artifact in ctx.artifacts:  # console text first: the settings written down override it
        if artifact.kind == "console" or artifact.kind == "log" and artifact.detail in TEXT_LOGS:
            _console(kb, artifact, obs)
    hits, code = {}, {}
    for artifact in ctx.of_kind(*STRUCTURED):
        found = facts_from_settings(kb, rows := settings(artifact))
        warmup_fraction(found)
        found.update(defaults(artifact, found))
        if artifact.kind == "training-script":
            code.update(script_findings(Path(artifact.path), found, obs))
        _summary(artifact, rows, found, obs)
        hits.update(found)
        framework = framework_of(artifact, rows)
        if framework and "train.framework" not in hits:
            obs.fact("train.framework", framework, SOURCE, artifact.path)
    for source, facts in ((SOURCE, hits), (SCRIPT, code)):
        for hit in facts.values():
            obs.fact(hit.fact, hit.value, source, hit.span, span=hit.span, trust=hit.trust)
    derive(obs, SOURCE)
    return obs


def _console(kb, artifact: Artifact, obs: Observations) -> None:
    text, cut = read_console(artifact.path)
    found = extract(kb, text)
    obs.merge(found.observations(CONSOLE, artifact.path))
    if cut:
        obs.find("setup.console_cut", "info", "console output larger than the read limit: its head and tail were "
                 "searched, line numbers in the tail count from the cut", artifact.path)


def _summary(artifact: Artifact, rows: list, found: dict, obs: Observations) -> None:
    """One line saying what was read, so an empty read is never silent."""
    if not found:
        obs.find("setup.nothing_read", "warning",
                 f"{len(rows)} settings read, none that the knowledge uses (precision, lr, warmup, clipping, "
                 "batch sizes, parallelism, LoRA, attention); give the launch command or config with those",
                 artifact.path, {"settings": len(rows)})
        return
    shown = ", ".join(f"{h.fact} = {h.value} ({h.span[:40]})" for h in list(found.values())[:8])
    more = f" and {len(found) - 8} more" if len(found) > 8 else ""
    auto = [r.path for r in rows if isinstance(r.value, str) and r.value.strip().lower() == "auto"]
    line = min((h.start for h in found.values() if h.start), default=0)
    obs.find("setup.settings", "info", f"{len(found)} settings used: {shown}{more}"
             + (f"; {len(auto)} left 'auto' (filled in from the HF TrainingArguments): {', '.join(auto[:6])}"
                if auto else ""),
             f"{artifact.path}:{line}" if line else artifact.path, {h.fact: h.value for h in found.values()})
