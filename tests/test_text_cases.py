"""What a report says and what llmfix must make of it, one table per symptom: tests/text_cases/<id>.yaml.

Each file lists texts written for the tests in the words public reports use (EN and ZH):
- ``sets``: the text sets the fact (to ``value`` when given, else true);
- ``sets_nothing``: a near miss leaves the fact unset;
- ``ranks``: a short report puts the cause within the first ``within`` (3 unless given) causes of
  ``llmfix ask --no-input --json``, itself or as a ``same_fault`` twin of one listed there;
- ``ranks_not``: the cause stays out of them.
A knowledge change that stops reading how users word a fault fails here; so does one that starts
reading it into sentences that only look alike."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from asking import causes, fact_value

FOLDER = Path(__file__).resolve().parent / "text_cases"
KINDS = ("sets", "sets_nothing", "ranks", "ranks_not")


def load_cases() -> list[tuple[str, str, dict]]:
    """(symptom, kind, case) for every case of every table."""
    out = []
    for path in sorted(FOLDER.glob("*.yaml")):
        table = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        unknown = set(table) - set(KINDS)
        assert not unknown, f"{path.name}: unknown sections {sorted(unknown)}"
        out += [(path.stem, kind, case) for kind in KINDS for case in table.get(kind) or []]
    return out


CASES = load_cases()


def _cases(*kinds: str):
    return [pytest.param(case, id=f"{symptom}-{kind}-{n}")
            for n, (symptom, kind, case) in enumerate(CASES) if kind in kinds]


def test_every_table_names_real_facts_and_causes(shipped_kb):
    """A misspelt fact would make a near miss pass for nothing; a table named after no symptom
    would never be read as one."""
    wrong = [(symptom, case) for symptom, kind, case in CASES
             if symptom not in shipped_kb.symptoms
             or ("fact" in case and case["fact"] not in shipped_kb.facts)
             or ("cause" in case and case["cause"] not in shipped_kb.causes)]
    assert not wrong, wrong
    assert len(CASES) >= 500


@pytest.mark.parametrize("case", _cases("sets"))
def test_the_text_sets_the_fact(shipped_kb, case):
    assert fact_value(shipped_kb, case["text"], case["fact"]) == case.get("value", True)


@pytest.mark.parametrize("case", _cases("sets_nothing"))
def test_the_near_miss_sets_nothing(shipped_kb, case):
    assert fact_value(shipped_kb, case["text"], case["fact"]) is None


def _top(case) -> set[str]:
    """The ids of the first ``within`` causes and of their same_fault twins (one fault, one entry)."""
    top = causes(case["text"])[:case.get("within", 3)]
    return {c["id"] for c in top} | {twin for c in top for twin in c["same_fault"]}


@pytest.mark.parametrize("case", _cases("ranks"))
def test_the_report_ranks_the_cause(case):
    assert case["cause"] in _top(case), sorted(_top(case))


@pytest.mark.parametrize("case", _cases("ranks_not"))
def test_the_report_keeps_the_cause_down(case):
    assert case["cause"] not in _top(case), sorted(_top(case))
