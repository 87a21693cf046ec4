"""What the knowledge tests ask of llmfix: the value one fact takes from a text, and the causes
`llmfix ask --no-input --json` ranks for a short report (in-process; exit 1 only means a cause
was confirmed)."""
from __future__ import annotations

import json

from click.testing import CliRunner

from troubleshoot.cli import main
from troubleshoot.evidence import extract


def fact_value(kb, text: str, name: str):
    """The value ``name`` takes from ``text``, or None when the text sets nothing."""
    hit = extract(kb, text).facts.get(name)
    return hit.value if hit else None


def answer(text: str, *args: str) -> dict:
    """The whole JSON answer to the report (the 20 best causes unless ``args`` say otherwise)."""
    result = CliRunner().invoke(main, ["ask", text, "--no-input", "--json", "--top", "20", *args])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def causes(text: str, *args: str) -> list[dict]:
    """The JSON causes of the report, best first."""
    return answer(text, *args)["causes"]


def ranked(text: str, *args: str) -> list[str]:
    """The cause ids of the report, best first."""
    return [c["id"] for c in causes(text, *args)]


def entry(text: str, cause: str) -> dict:
    """The JSON entry of ``cause`` for the report (its posterior, prior, status, why)."""
    return next(c for c in causes(text) if c["id"] == cause)
