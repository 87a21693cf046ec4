"""Loaders recognise artifacts by content and read them without ever executing code.

``detect(path)`` asks each loader family's ``sniff(path) -> Artifact | None`` in turn; the first
that recognises the path wins. Sniffers are cheap: they read headers and key names, not tensors.
"""
from __future__ import annotations

import importlib
from pathlib import Path

from ..errors import ArtifactError
from ..observations import Artifact, Finding

# Order matters: a .pt holding input_ids is a batch, not a state dict; a folder with config.json
# is a checkpoint even when it also holds trainer_state.json.
SNIFFERS = ("incident", "checkpoint", "batch", "logs", "setup")
CHECKPOINT_KINDS = ("hf-checkpoint", "megatron-checkpoint", "state-dict")


def detect(path: str | Path) -> Artifact:
    """Recognise one user-given path, or raise ArtifactError saying why not."""
    p = Path(path)
    if str(path) == "-":  # console output on stdin
        return importlib.import_module(f"{__name__}.setup").sniff("-")
    if not p.exists():
        raise ArtifactError(p, "no such file or directory")
    if p.is_dir() and _is_empty(p):
        raise ArtifactError(p, "empty directory: expected a checkpoint folder")
    if p.is_file() and p.stat().st_size == 0:
        raise ArtifactError(p, "empty file")
    for name in SNIFFERS:
        try:
            artifact = importlib.import_module(f"{__name__}.{name}").sniff(p)
        except ModuleNotFoundError as err:
            raise ArtifactError(p, f"reading this needs {err.name}: pip install 'llmfix[models]'") from None
        if artifact is not None:
            return artifact
    what = "folder" if p.is_dir() else "file"
    raise ArtifactError(p, f"unrecognised {what}: not a checkpoint, training log, data batch, launch script, "
                           "training script, trainer config or console output")


def _is_empty(folder: Path) -> bool:
    """Whether the folder has no entries; ArtifactError when it cannot be listed (mode 700 of
    another user), so an unreadable path is one line like any other unreadable input."""
    try:
        return next(folder.iterdir(), None) is None
    except OSError as err:
        raise ArtifactError(folder, f"cannot read the folder ({err.strerror or err})") from None


def warnings(artifact: Artifact) -> list[Finding]:
    """What the loader noticed while opening ``artifact`` (a ``latest`` pointing nowhere, refused
    or skipped pickles), reported once per artifact by ``probes.run_all`` whatever probes run."""
    if artifact.kind not in CHECKPOINT_KINDS:
        return []
    from .checkpoint import open_checkpoint

    return list(open_checkpoint(artifact.path).issues)
