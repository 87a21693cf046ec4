"""Scripted sessions per symptom: given answers, the expected cause ranks first (`pytest -k nan-loss`)."""
from pathlib import Path

import pytest
import yaml

from troubleshoot.engine import diagnose
from troubleshoot.observations import Fact

FOLDER = Path(__file__).resolve().parent / "scenarios"


def sessions():
    for path in sorted(FOLDER.glob("*.yaml")):
        for session in yaml.safe_load(path.read_text(encoding="utf-8"))["sessions"]:
            yield pytest.param(session, id=f"{path.stem}:{session['name']}")


@pytest.mark.parametrize("session", sessions())
def test_session_ranks_expected_cause_first(shipped_kb, session):
    answers = {}
    for name, value in (session.get("answers") or {}).items():
        assert name in shipped_kb.facts, f"unknown fact {name}"
        answers[name] = Fact(name, value, "user")
    diag = diagnose(shipped_kb, {session["symptom"]: 1.0}, answers=answers)
    ranked = [c.id for c in diag.causes]
    assert ranked[0] == session["expect_first"], f"got {ranked[:3]}\n" + diag.causes[0].explain()
    steps = " ".join(s for c in diag.causes[:1] for f in c.fixes for s in f.steps)
    for text in session.get("expect_text", []):
        assert text in steps, f"{text!r} not in the first cause's fix steps"


def test_every_symptom_has_three_sessions(shipped_kb):
    counts = {sid: 0 for sid in shipped_kb.symptoms}
    for param in sessions():
        counts[param.values[0]["symptom"]] += 1
    assert all(n >= 3 for n in counts.values()), counts
