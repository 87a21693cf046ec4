"""'trainable params: 0' names the adapter in a PEFT run and the frozen model otherwise: the
specific cause (no-grad-flow.lora-no-trainable) ranks first in a LoRA run, the generic one
(no-grad-flow.frozen-params) in a full fine-tune or when the method is unknown."""
import json

import pytest
from click.testing import CliRunner

from troubleshoot.cli import main

PEFT_PRINT = "trainable params: 0 || all params: 6738415616 || trainable%: 0.0"


def _causes(*args):
    result = CliRunner().invoke(main, ["ask", "--no-input", "--json", "--top", "10", *args])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)["causes"]


@pytest.mark.parametrize("text", [
    f"LoRA training, {PEFT_PRINT}",
    f"QLoRA fine-tuning of llama 2 with get_peft_model, print_trainable_parameters shows {PEFT_PRINT}",
    f"用lora微调qwen2，{PEFT_PRINT}",
    f"{PEFT_PRINT} when I start LoRA training, the loss stays flat and does not move",
])
def test_lora_run_ranks_the_adapter_cause_first(text):
    causes = _causes(text)
    assert causes[0]["id"] == "no-grad-flow.lora-no-trainable", [c["id"] for c in causes[:3]]
    frozen = next(c for c in causes if c["id"] == "no-grad-flow.frozen-params")
    assert frozen["score"] < causes[0]["score"]


def test_measured_lora_run_ranks_the_adapter_cause_first():
    """Answers (trust 1) instead of words: the same order."""
    causes = _causes("-a", "train.finetune_method=lora", "-a", "grads.trainable_fraction=0", "parameters do not update")
    assert causes[0]["id"] == "no-grad-flow.lora-no-trainable", [c["id"] for c in causes[:3]]
    assert causes[0]["status"] == "confirmed"  # measured, nothing trainable in a LoRA run is the adapter


@pytest.mark.parametrize("text", [
    "full fine-tuning, requires_grad is False for all parameters, trainable params: 0",
    "全参数微调，trainable params: 0，loss不下降",
    PEFT_PRINT,
])
def test_full_or_unknown_run_ranks_frozen_params_first(text):
    causes = _causes(text)
    assert causes[0]["id"] == "no-grad-flow.frozen-params", [c["id"] for c in causes[:3]]
    assert causes[0]["status"] == "confirmed"
