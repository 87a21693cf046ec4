"""Faults that reach users as a broken checkpoint or export but are known to the knowledge under
another symptom: each is declared the same fault as its twin, so whichever symptom a report lands
on, the fault is listed once with its twin named."""
from __future__ import annotations

import json

from click.testing import CliRunner

from troubleshoot.cli import main
from troubleshoot.engine import twins
from troubleshoot.knowledge import load


def ask(report: str) -> list[dict]:
    result = CliRunner().invoke(main, ["ask", report, "--no-input", "--json"])
    return json.loads(result.stdout)["causes"]


def test_the_converter_permutation_bug_is_one_fault_under_both_symptoms():
    groups = twins(load())
    assert "tp-mismatch.conversion-permute" in groups["save-export.conversion-rope-permute"]
    assert "save-export.conversion-rope-permute" in groups["tp-mismatch.conversion-permute"]


def test_a_checkpoint_that_resumes_only_the_weights_is_the_spike_after_resume():
    assert "loss-spike.resume-mismatch" in twins(load())["save-export.resume-state-incomplete"]
    causes = ask("saved checkpoint problem: after resume from the checkpoint the loss and the learning rate "
                 "jump, the optimizer state and lr scheduler seem not restored")
    top = [(c["id"], *c["same_fault"]) for c in causes[:3]]
    assert any("save-export.resume-state-incomplete" in ids or "loss-spike.resume-mismatch" in ids for ids in top), top


def test_a_save_without_a_resume_does_not_point_at_the_resume_fault():
    causes = ask("the saved checkpoint of my zero3 run is only a few KB and loading it fails")
    assert "save-export.resume-state-incomplete" not in [c["id"] for c in causes[:3]]
