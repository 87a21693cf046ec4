"""What people already have beside a failed run, recognised by content and read statically
(never executed, never imported): launch commands and shell scripts, Python training scripts,
trainer configs (YAML / JSON) and console output with tracebacks.

``sniff(path)`` gives an Artifact of kind ``launch-script``, ``training-script``,
``trainer-config`` or ``console``; ``settings(artifact)`` gives the ``Setting`` rows (a key
path, its raw value and where it was written) that probes/setup maps to facts through the
knowledge's key rules. Console text is read by troubleshoot/evidence.
"""
from __future__ import annotations

from pathlib import Path

from ...errors import ArtifactError
from ...observations import Artifact
from .config import TRAINERS, read_config, trainer_of
from .read import MAX_BYTES, STDIN, Setting, read_text
from .script import is_python, script_settings
from .shell import is_launch, shell_settings

KINDS = ("launch-script", "training-script", "trainer-config", "console")
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")

__all__ = ["KINDS", "Setting", "read_text", "settings", "sniff"]


def sniff(path: str | Path) -> Artifact | None:
    """Recognise a launch script, training script, trainer config or console output (cheap: one
    bounded read), or None."""
    p = Path(path)
    if str(path) == STDIN:
        return Artifact(STDIN, "console", "standard input")
    if not p.is_file():
        return None
    head = read_text(p, limit=1 << 16)
    if head is None:
        return None
    suffix = p.suffix.lower()
    if suffix in CONFIG_SUFFIXES:
        if p.stat().st_size > MAX_BYTES:
            raise ArtifactError(p, f"config larger than {MAX_BYTES >> 20} MiB: not a trainer config")
        data = read_config(p)
        trainer = trainer_of(data) if isinstance(data, dict) else None
        if trainer:
            return Artifact(str(p), "trainer-config", TRAINERS[trainer])
    if is_python(p, head):
        return Artifact(str(p), "training-script", "python script (read with ast)")
    if is_launch(p, head):
        return Artifact(str(p), "launch-script", "launch command / shell script")
    if _looks_like_console(head):
        return Artifact(str(p), "console", "console output")
    return None


def _looks_like_console(head: str) -> bool:
    markers = ("Traceback (most recent call last)", "Error:", "error:", "Exception:", "CUDA", "NCCL", "[rank")
    return any(m in head for m in markers)


def settings(artifact: Artifact) -> list[Setting]:
    """The key/value settings written in a launch script, training script or config."""
    p = Path(artifact.path)
    if artifact.kind == "trainer-config":
        return list(_config_settings(p))
    if artifact.kind == "training-script":
        return script_settings(p)
    if artifact.kind == "launch-script":
        return shell_settings(p)
    return []


def _config_settings(p: Path):
    from .config import config_settings

    return config_settings(p)
