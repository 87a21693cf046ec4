"""Probe families: each turns artifacts into findings and facts (DESIGN.md "Probes").

A family is a module or subpackage exposing ``run(ctx: ProbeContext) -> Observations`` and a
``PUBLISHES`` tuple naming every fact it can publish. A family looks at ``ctx.artifacts`` itself
and returns empty Observations when nothing applies to it. Families are imported lazily, so that
``llmfix ask`` never imports torch.
"""
from __future__ import annotations

import ast
import importlib
import warnings as warnings_module
from collections.abc import Callable
from pathlib import Path

from ..errors import LlmfixError
from ..observations import Fact, Observations
from .context import ProbeContext

__all__ = ["FAMILIES", "SHARED_FACTS", "ProbeContext", "family_module", "publishes", "run_all"]

# (family name, module under probes/). The name is the ``probe:<name>`` source of its facts.
FAMILIES = (
    ("setup", "setup"),
    ("config", "config"),
    ("weights", "weights"),
    ("optimizer", "optimizer"),
    ("logs", "logs"),
    ("batch", "data.batch"),
    ("gradflow", "forward.gradflow"),
    ("masks", "forward.masks"),
    ("incident", "incident"),
)
# Sources of facts read from what people wrote (scripts, configs, console text): any measured fact
# overrides them, whatever the family (text < probes < answers).
WRITTEN = ("probe:setup", "probe:script", "probe:console")




def _worse(old: Fact, new: Fact) -> Fact:
    """The value saying more is wrong: True over False, the larger count."""
    return new if new.value > old.value else old


def _from(family: str) -> Callable[[Fact, Fact], Fact]:
    return lambda old, new: new if new.source == f"probe:{family}" else old


# The facts more than one family publishes, and how their values merge. Every other fact has one
# publishing family (kb lint checks the PUBLISHES declarations against this table).
SHARED_FACTS: dict[str, tuple[str, Callable[[Fact, Fact], Fact]]] = {
    "model.has_embed_layernorm": ("the tensors present (weights) beat what the config says", _from("weights")),
    "weights.nonfinite": ("NaN/Inf in the file (weights) or in the built model (gradflow): either", _worse),
    "weights.nonfinite_tensors": ("the larger count of the two", _worse),
    "data.has_nonfinite": ("NaN/Inf in a token batch (batch) or any tensor of an incident's batch (incident): either",
                           _worse),
    "grads.nonfinite": ("NaN/Inf gradients from the built model (gradflow) or the replayed failing step (incident)",
                        _worse),
}


def family_module(name: str):
    """The module of probe family ``name`` (imports it, and so maybe torch)."""
    return importlib.import_module(f"{__name__}.{dict(FAMILIES)[name]}")


def run_all(ctx: ProbeContext) -> Observations:
    """The loaders' own warnings, then every family, merged in FAMILIES order.

    Merge rule: a fact has one publishing family, except those in SHARED_FACTS, which merge by the
    rule written there (so the order of FAMILIES never decides a fact's value), and those read
    from what people wrote (WRITTEN, the setup family, run first), which any measurement
    overrides. A family that raises does not hide the others: its exception becomes an error
    finding ``probe.crashed`` (the findings of the families before it are kept), so the command
    exits 1 and the report never says that nothing was wrong. An input that turns out unreadable
    (ArtifactError) ends the command with exit 2 when it is the only one, and is the error finding
    ``input.unreadable`` when other inputs were given (their findings are kept).
    """
    from ..loaders import warnings

    out = Observations(artifacts=list(ctx.artifacts))
    for artifact in ctx.artifacts:
        out.findings.extend(warnings(artifact))
    for name, _ in FAMILIES:
        try:
            with warnings_module.catch_warnings():  # a library's UserWarning is no finding: keep stderr clean
                warnings_module.simplefilter("ignore")
                part = family_module(name).run(ctx)
        except LlmfixError as err:
            if len(ctx.artifacts) < 2:  # the one input cannot be used: one line, exit 2
                raise
            out.find("input.unreadable", "error", str(err), getattr(err, "path", ""))
            continue
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
        merged = {k: SHARED_FACTS[k][1](out.facts[k], f) for k, f in part.facts.items()
                  if k in out.facts and k in SHARED_FACTS and out.facts[k].source not in WRITTEN}
        out.merge(part)
        out.facts.update(merged)
    from ..knowledge import load
    from .risks import flag
    from .setup.coverage import account

    flag(load(), out)
    account(out)
    return out


def publishes() -> dict[str, tuple[str, ...]]:
    """Each family's ``PUBLISHES`` declaration, read from its source (importing a family may need
    torch; ``kb lint`` must not)."""
    root = Path(__file__).parent
    out = {}
    for name, module in FAMILIES:
        path = root.joinpath(*module.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out[name] = next(tuple(ast.literal_eval(node.value)) for node in tree.body if isinstance(node, ast.Assign)
                         and any(getattr(t, "id", "") == "PUBLISHES" for t in node.targets))
    return out
