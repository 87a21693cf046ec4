"""What every probe gets: the artifacts and the user's switches, as typed fields.

All artifacts are passed to every family (a batch probe reads the vocabulary of the checkpoint
given beside it); each family picks the kinds it needs with ``of_kind``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..observations import Artifact

Progress = Callable[[int, int, str], None]  # (done bytes, total bytes, tensor name)


@dataclass
class ProbeContext:
    artifacts: list[Artifact]
    device: str = "auto"                # --device auto | cpu | cuda
    static: bool = False                # --static: never run the model
    forward: bool = False               # --forward: run the model even above the size caps
    model_factory: str | None = None    # --model-factory module:callable or file.py:callable
    progress: Progress | None = None    # weight streaming progress, for a terminal's status line
    # The one model of this command, decided on first use by probes/forward/model.py and shared by
    # the gradient-flow and mask probes (building a model twice would double the cost).
    model_request: Any = field(default=None, repr=False)

    def of_kind(self, *kinds: str) -> list[Artifact]:
        return [a for a in self.artifacts if a.kind in kinds]
