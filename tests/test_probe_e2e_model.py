"""`llmfix probe --model-factory` end to end: model-level faults rank their cause first (issues 5, 8)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from troubleshoot import cli

FACTORY = str(Path(__file__).resolve().parent / "modelfactory.py")


def probe(factory: str, *paths: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli.main, ["probe", "--json", "--device", "cpu",
                                           "--model-factory", f"{FACTORY}:{factory}", *paths])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)
    assert not [f for f in data["findings"] if f["id"] == "probe.crashed"], data["findings"]
    return result.exit_code, data


@pytest.mark.parametrize("factory, expected, finding", [
    ("leaky_lm", "mask-error.causal-leak", "forward.mask.causal_leak"),
    ("mask_ignoring_lm", "mask-error.mask-not-applied", "forward.mask.ignored"),
    ("flipped_mask_lm", "mask-error.inverted", "forward.mask.inverted"),
    ("frozen_lm", "no-grad-flow.frozen-params", "grads.frozen"),
    ("dead_layer_lm", "no-grad-flow.dead-layers", "grads.dead_layers"),
    ("fp16_overflow_half_lm", "fp16-overflow.activation-overflow", "forward.fp16_overflow_risk"),
    ("nan_weight_lm", "nan-loss.nonfinite-weights", "forward.first_nonfinite_module"),
])
def test_model_fault_ranks_its_cause_first(factory, expected, finding):
    code, data = probe(factory)
    found = {f["id"] for f in data["findings"] if f["severity"] in ("error", "warning")}
    assert finding in found, sorted(found)
    assert data["causes"][0]["id"] == expected, [c["id"] for c in data["causes"][:3]]


@pytest.mark.parametrize("factory", ["correct_lm", "adapter_lm", "correct_lm_bf16"])
def test_correct_models_find_nothing(factory):
    code, data = probe(factory)
    errors = [f for f in data["findings"] if f["severity"] == "error"]
    assert not errors and code == 0, errors


def test_probe_needs_a_path_or_a_factory():
    result = CliRunner().invoke(cli.main, ["probe"])
    assert result.exit_code == 2 and "--model-factory" in result.output
