"""Probe families: each turns artifacts into findings and facts (DESIGN.md "Probes").

A family is a module or subpackage exposing ``run(ctx: ProbeContext) -> Observations`` and a
``PUBLISHES`` tuple naming every fact it can publish. A family looks at ``ctx.artifacts`` itself
and returns empty Observations when nothing applies to it. Families are imported lazily, so that
``llmfix ask`` never imports torch.
"""
from __future__ import annotations

import importlib

from ..errors import LlmfixError
from ..observations import Observations
from .context import ProbeContext

__all__ = ["FAMILIES", "ProbeContext", "family_module", "run_all"]

# (family name, module under probes/). The name is the ``probe:<name>`` source of its facts.
FAMILIES = (
    ("config", "config"),
    ("weights", "weights"),
    ("optimizer", "optimizer"),
    ("logs", "logs"),
    ("batch", "data.batch"),
    ("gradflow", "forward.gradflow"),
    ("masks", "forward.masks"),
)


def family_module(name: str):
    """The module of probe family ``name`` (imports it, and so maybe torch)."""
    return importlib.import_module(f"{__name__}.{dict(FAMILIES)[name]}")


def run_all(ctx: ProbeContext) -> Observations:
    """The loaders' own warnings, then every family, merged in FAMILIES order.

    Merge rule: each fact has one publishing family (``kb lint`` checks the ``PUBLISHES``
    declarations for overlaps), so the order of FAMILIES never decides a fact's value.
    A family that raises does not hide the others: its exception becomes an error finding
    ``probe.crashed`` (the findings of the families before it are kept), so the command exits 1
    and the report never says that nothing was wrong.
    """
    from ..loaders import warnings

    out = Observations(artifacts=list(ctx.artifacts))
    for artifact in ctx.artifacts:
        out.findings.extend(warnings(artifact))
    for name, _ in FAMILIES:
        try:
            part = family_module(name).run(ctx)
        except LlmfixError:
            raise
        except ModuleNotFoundError as err:  # torch / safetensors / transformers not installed
            out.find("probe.missing_dependency", "info",
                     f"probe '{name}' skipped: needs {err.name} (pip install 'llmfix[models]')")
            continue
        except Exception as err:  # noqa: BLE001 - one broken probe must not hide what the others found
            out.find("probe.crashed", "error",
                     f"probe '{name}' crashed: {type(err).__name__}: {err}"[:300], name,
                     {"family": name, "exception": type(err).__name__})
            continue
        part.artifacts = []  # already listed
        out.merge(part)
    return out
