"""The causes added for issue 13's uncovered labels are found from how people describe them.

Each query is written for this test in the words such reports use (the error line, the flags);
the cause must rank in the top 3 of `llmfix ask --no-input --json`, without questions."""
import json

import pytest
from click.testing import CliRunner

from troubleshoot.cli import main

CASES = [
    ("QLoRA fine-tuning on a Tesla V100, the loss is 0 from the first step with --quantization_bit 4 --fp16",
     "zero-loss.quantized-on-old-gpu"),
    ("merge_and_unload fails with NotImplementedError: Cannot copy out of meta tensor; no data! when merging my LoRA adapter",
     "save-export.merge-offloaded-weights"),
    ("Fine-tuning Jamba with LoRA (target_modules q_proj, v_proj), the loss does not decrease at all",
     "loss-plateau.lora-misses-hybrid-layers"),
    ("PPO objective/kl is negative while kl_estimator is k1, the KL penalty in the reward looks different",
     "preference-divergence.kl-estimate-mismatch"),
]


@pytest.mark.parametrize("query,cause", CASES)
def test_new_cause_in_the_top_three(query, cause):
    result = CliRunner().invoke(main, ["ask", "--no-input", "--json", "--top", "10", query])
    assert result.exit_code in (0, 1), result.output
    ranked = [c["id"] for c in json.loads(result.output)["causes"]]
    assert cause in ranked[:3], ranked[:5]


def test_quantisation_on_a_new_gpu_is_not_this_cause():
    """The same zero loss on an A100 does not lift the old-GPU cause."""
    result = CliRunner().invoke(main, ["ask", "--no-input", "--json", "--top", "20",
                                       "QLoRA fine-tuning on an A100, the loss is 0 from the first step with --quantization_bit 4"])
    causes = {c["id"]: c for c in json.loads(result.output)["causes"]}
    assert causes["zero-loss.quantized-on-old-gpu"]["status"] == "untested"
