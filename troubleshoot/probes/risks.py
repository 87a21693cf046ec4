"""Settings known to lead to a fault, flagged before the fault shows (a cause's ``risk``).

An expert reading a config says "fp16 on a model released in bf16 will overflow" before anyone
reports a NaN. The knowledge writes that down per cause (rules/*.yaml, ``risk: {when, says}``);
after every probe has run, each risk whose condition holds over the published facts (settings
read from a command, script or config, a checkpoint's config.json, ...) becomes one warning
``setup.risk`` naming the cause. A condition holds only when every fact it reads is known: a
setting nobody wrote is no risk. Warnings leave the exit code at 0 unless ``--fail-on warning``;
risks never put a symptom on the table (engine.SETTINGS_SOURCE), so a clean run stays clean.
"""
from __future__ import annotations

from ..knowledge.model import KnowledgeBase
from ..observations import Observations


def flag(kb: KnowledgeBase, obs: Observations) -> None:
    """Add a ``setup.risk`` warning for each cause whose risk holds over ``obs.facts``."""
    values = {name: fact.value for name, fact in obs.facts.items()}
    for cause in kb.causes.values():
        if cause.risk is None or not cause.risk.when.holds(values):
            continue
        names = sorted(cause.risk.when.facts & values.keys())
        quoted = "; ".join(obs.facts[name].span or f"{name} = {values[name]}" for name in names)
        obs.find("setup.risk", "warning", f"{cause.risk.says} [{quoted}] (llmfix kb show {cause.id})",
                 _where(obs, names), {"cause": cause.id, "settings": {name: values[name] for name in names}})


def _where(obs: Observations, names: list[str]) -> str:
    """The file a deciding setting was read from (the artifact whose setup summary lists it), else
    the first file given."""
    paths = [a.path for a in obs.artifacts]
    for finding in obs.findings:
        if finding.id == "setup.settings" and isinstance(finding.value, dict) and finding.value.keys() & set(names):
            return next((p for p in paths if finding.where == p or finding.where.startswith(p + ":")), finding.where)
    return paths[0] if paths else ""
