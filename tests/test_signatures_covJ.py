"""The error lines of rules/_signatures/covJ.yaml: TRL's / ms-swift's warning that no reward
function scored a completion sets the non-finite reward fact (the GRPO NaN-advantage cause reads
it), and a reward line that says something else does not."""
from __future__ import annotations

import pytest

from troubleshoot.evidence import extract
from troubleshoot.knowledge import load

WARNING = ("/usr/local/lib/python3.11/site-packages/trl/trainer/grpo_trainer.py:1102: UserWarning: All reward "
           "functions returned None for the following kwargs: {'prompt': 'What is 17 * 3?', 'completion': "
           "'<think>'}. Please ensure that at least one reward function returns a valid reward.")


@pytest.fixture(scope="module")
def kb():
    return load()


def test_the_reward_warning_sets_the_nonfinite_reward_fact(kb):
    ex = extract(kb, WARNING)
    assert "grpo_all_reward_functions_none" in [s.signature.id for s in ex.signatures]
    assert ex.facts["rl.reward_or_advantage_nonfinite"].value is True


@pytest.mark.parametrize("text", [
    "{'rewards/accuracy_reward/mean': 0.41, 'rewards/format_reward/mean': 0.88, 'reward_std': 0.31}",
    "Please ensure that at least one reward function is passed to GRPOTrainer",
])
def test_other_reward_lines_do_not_fire(kb, text):
    assert "grpo_all_reward_functions_none" not in [s.signature.id for s in extract(kb, text).signatures]
