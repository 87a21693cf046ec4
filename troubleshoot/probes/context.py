"""What every probe gets: the artifacts and the user's switches, as typed fields.

All artifacts are passed to every family (a batch probe reads the vocabulary of the checkpoint
given beside it); each family picks the kinds it needs with ``of_kind``.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..observations import Artifact

if TYPE_CHECKING:  # building a model needs torch; the context must not
    from .forward.model import ModelRequest

Progress = Callable[[int, int, str], None]  # (done bytes, total bytes, tensor name)
PhaseHook = Callable[[str, "float | None"], None]  # (phase, None when it starts / seconds when it ends)


@dataclass
class ProbeContext:
    artifacts: list[Artifact]
    device: str = "auto"                # --device auto | cpu | cuda
    static: bool = False                # --static: never run the model
    forward: bool = False               # --forward: run the model even above the size caps
    model_factory: str | None = None    # --model-factory module:callable or file.py:callable
    progress: Progress | None = None    # weight streaming progress, for a terminal's status line
    on_phase: PhaseHook | None = None   # slow steps (building the model, gradient flow...), ditto
    # The one model of this command, decided on first use by probes/forward/model.py and shared by
    # the gradient-flow and mask probes (building a model twice would double the cost).
    model_request: ModelRequest | None = field(default=None, repr=False)

    def of_kind(self, *kinds: str) -> list[Artifact]:
        return [a for a in self.artifacts if a.kind in kinds]

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Announce a slow step and its elapsed time through ``on_phase`` (the terminal's status
        lines); a probe never prints, so this is a no-op without a hook."""
        if self.on_phase is None:
            yield
            return
        start = time.monotonic()
        self.on_phase(name, None)
        try:
            yield
        finally:
            self.on_phase(name, time.monotonic() - start)
