"""Probe families: each turns artifacts into findings and facts (DESIGN.md "Probes").

Every family is one module here exposing ``run(ctx: ProbeContext) -> Observations``. A family
looks at ``ctx.artifacts`` itself and returns empty Observations when nothing applies to it.
Families are imported lazily, so that ``llmfix ask`` never imports torch.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from ..errors import LlmfixError
from ..observations import Artifact, Observations

FAMILIES = ("setup", "config", "weights", "optimizer", "logs", "batch", "gradflow", "masks")  # setup first: measurements override it


@dataclass
class ProbeContext:
    """What every probe gets: all artifacts (so a batch probe can read the vocab of the checkpoint
    given beside it) and the user's switches."""

    artifacts: list[Artifact]
    device: str = "auto"          # auto | cpu | cuda
    static: bool = False          # --static: never run the model
    forward: bool = False         # --forward: run the model even above the size caps
    model_factory: str | None = None  # module:callable or file.py:callable
    plot: str | None = None       # --plot out.png for the log probe
    options: dict = field(default_factory=dict)

    def of_kind(self, *kinds: str) -> list[Artifact]:
        return [a for a in self.artifacts if a.kind in kinds]


def run_all(ctx: ProbeContext) -> Observations:
    """Run every family and merge what they found, in FAMILIES order."""
    out = Observations(artifacts=list(ctx.artifacts))
    for name in FAMILIES:
        try:
            part = importlib.import_module(f"{__name__}.{name}").run(ctx)
        except LlmfixError:
            raise
        except ModuleNotFoundError as err:  # torch / safetensors / transformers not installed
            out.find("probe.missing_dependency", "info",
                     f"probe '{name}' skipped: needs {err.name} (pip install 'llmfix[models]')")
            continue
        except Exception as err:  # one broken probe must not hide what the others found
            out.find("probe.failed", "warning", f"probe '{name}' stopped: {type(err).__name__}: {err}"[:300])
            continue
        part.artifacts = []  # already listed
        out.merge(part)
    from .setup.coverage import account

    account(out)
    return out
