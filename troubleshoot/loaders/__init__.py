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
SNIFFERS = ("checkpoint", "batch", "logs")
CHECKPOINT_KINDS = ("hf-checkpoint", "megatron-checkpoint", "state-dict")


def detect(path: str | Path) -> Artifact:
    """Recognise one user-given path, or raise ArtifactError saying why not."""
    p = Path(path)
    if not p.exists():
        raise ArtifactError(p, "no such file or directory")
    if p.is_dir() and not any(p.iterdir()):
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
    raise ArtifactError(p, f"unrecognised {what}: not a checkpoint, training log or data batch")


def warnings(artifact: Artifact) -> list[Finding]:
    """What the loader noticed while opening ``artifact`` (a ``latest`` pointing nowhere, refused
    or skipped pickles), reported once per artifact by ``probes.run_all`` whatever probes run."""
    if artifact.kind not in CHECKPOINT_KINDS:
        return []
    from .checkpoint import open_checkpoint

    return list(open_checkpoint(artifact.path).issues)
