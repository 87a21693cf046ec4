"""Never "nothing wrong found" when nothing usable was read (issue 13, item 4).

After all probes ran, an artifact that gave nothing to reason with - a log in which no training
record and no known error line was recognised, a script or config without a setting the
knowledge uses - gets an ``input.nothing_usable`` finding that says what was read, what was
not, and what to give instead. The CLI exits 2 when that is true of every artifact.
"""
from __future__ import annotations

from ...observations import Artifact, Finding, Observations

ALWAYS_READ = ("hf-checkpoint", "megatron-checkpoint", "state-dict", "batch")  # their probes always measure
EMPTY = ("logs.summary", "setup.nothing_read", "setup.console_cut", "probe.missing_dependency",
         "logs.tensorboard_missing")
INSTEAD = {
    "log": "the console output that holds the loss lines (HF `{'loss': ...}` dicts, "
           "Megatron `iteration N/M | lm loss`, "
           "nanoGPT `iter N: loss`), trainer_state.json, or metrics as JSONL / CSV",
    "console": "the whole console output with the traceback, or the training log with its loss lines",
    "launch-script": "the launch command with its flags (torchrun / deepspeed / accelerate launch ... --lr ... --fp16)",
    "training-script": "the part of the script that builds TrainingArguments / the optimizer / the model "
                       "(with its dtype)",
    "trainer-config": "the trainer's YAML / JSON config with precision, learning rate and batch settings",
}


def account(obs: Observations) -> list[str]:
    """Add a finding for each artifact nothing usable came from; returns their paths."""
    empty = [a for a in obs.artifacts if a.kind not in ALWAYS_READ and not _used(a, obs.findings)]
    for artifact in empty:
        obs.find("input.nothing_usable", "warning", _message(artifact, obs.findings), artifact.path)
    return [a.path for a in empty]


def _used(artifact: Artifact, findings: list[Finding]) -> bool:
    for f in findings:
        if not _about(f, artifact):
            continue
        if f.id == "logs.summary" and isinstance(f.value, dict) and f.value.get("records"):
            return True
        if f.id not in EMPTY:
            return True
    return False


def _about(finding: Finding, artifact: Artifact) -> bool:
    return finding.where == artifact.path or finding.where.startswith(artifact.path + ":")


def _message(artifact: Artifact, findings: list[Finding]) -> str:
    read = next((f.message for f in findings if _about(f, artifact) and f.id in ("logs.summary", "setup.nothing_read")),
                f"read as {artifact.detail or artifact.kind}")
    return (f"nothing usable: {read}; no training record, known error line or setting was recognised, so nothing "
            f"can be concluded from it. Give instead {INSTEAD.get(artifact.kind, INSTEAD['log'])}, or describe "
            "the problem: llmfix ask \"...\" --probe PATH")
