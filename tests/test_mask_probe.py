"""Mask-invariant probe: causal leaks, ignored / inverted masks, position ids, fully masked rows.

Each hand-written model in tests/modelfactory.py carries one mask bug; the probe must find it
with the right finding and fact, and a correct model (hand-written or transformers GPT-2, Llama,
BERT in fp32 and bf16) must give no error finding.
"""
from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from troubleshoot.observations import Artifact  # noqa: E402
from troubleshoot.probes import ProbeContext
from troubleshoot.probes.forward import masks  # noqa: E402

HERE = Path(__file__).parent
FACTORY = HERE / "modelfactory.py"
ALL_CLEAR = {"forward.mask.causal_leak": False, "forward.mask.ignored": False,
             "forward.mask.inverted": False, "forward.position_ids_dependent": False,
             "forward.mask.fully_masked_nan": False}


def probe(name: str):
    obs = masks.run(ProbeContext([], model_factory=f"{FACTORY}:{name}"))
    return {f.id: f for f in obs.findings}, {k: v.value for k, v in obs.facts.items()}


def errors(found: dict) -> list[str]:
    return [f"{f.id}: {f.message}" for f in found.values() if f.severity == "error"]


@pytest.mark.parametrize("name", ["correct_lm", "correct_lm_bf16"])
def test_correct_model_keeps_every_invariant(name):
    found, facts = probe(name)
    assert errors(found) == []
    assert facts == ALL_CLEAR
    for fid in ("forward.mask.causal", "forward.mask.padding", "forward.position_ids",
                "forward.mask.fully_masked"):
        assert found[fid].severity == "info", fid
    value = found["forward.mask.padding"].value
    assert value["tolerance"] > 0 and set(value["max_deviation"]) >= {"pad_content", "left_vs_alone"}


@pytest.mark.parametrize("name", ["leaky_lm", "leaky_lm_bf16"])
def test_bidirectional_attention_in_a_causal_lm(name):
    found, facts = probe(name)
    leak = found["forward.mask.causal_leak"]
    assert leak.severity == "error" and facts["forward.mask.causal_leak"] is True
    assert leak.value["first_position"] == 0 and leak.value["first_module"] == "blocks.0.attn"
    assert leak.value["max_deviation"] > leak.value["tolerance"]
    assert [e.split(":")[0] for e in errors(found)] == ["forward.mask.causal_leak"]


def test_mask_not_applied():
    found, facts = probe("mask_ignoring_lm")
    assert found["forward.mask.ignored"].severity == "error"
    assert facts["forward.mask.ignored"] is True and facts["forward.mask.inverted"] is False
    assert "flipping it changes nothing" in found["forward.mask.ignored"].message
    assert facts["forward.mask.causal_leak"] is False


@pytest.mark.parametrize("name", ["flipped_mask_lm", "flipped_mask_lm_bf16"])
def test_mask_convention_flipped(name):
    found, facts = probe(name)
    assert found["forward.mask.inverted"].severity == "error"
    assert facts["forward.mask.inverted"] is True and facts["forward.mask.ignored"] is False
    assert [e.split(":")[0] for e in errors(found)] == ["forward.mask.inverted"]


def test_position_ids_ignored_under_left_padding():
    found, facts = probe("position_blind_lm")
    pos = found["forward.position_ids"]
    assert pos.severity == "warning" and "left padding" in pos.message
    assert facts["forward.position_ids_dependent"] is True and errors(found) == []


def test_rows_of_a_batch_influence_each_other():
    found, facts = probe("batch_mixing_lm")
    assert found["forward.position_ids"].severity == "error"
    assert "another" in found["forward.position_ids"].message or "row 2" in found["forward.position_ids"].message
    assert facts["forward.position_ids_dependent"] is True


def test_fully_masked_row_nan_in_its_own_row():
    found, facts = probe("neg_inf_mask_1layer_lm")
    nan = found["forward.mask.fully_masked_nan"]
    assert nan.severity == "warning" and nan.value["own_row_nan"] and not nan.value["other_rows_nan"]
    assert facts["forward.mask.fully_masked_nan"] is True and errors(found) == []


def test_minus_inf_masks_spread_nan_under_left_padding():
    found, facts = probe("neg_inf_mask_lm")
    assert found["forward.mask.fully_masked_nan"].severity == "error"
    assert facts["forward.mask.fully_masked_nan"] is True
    assert "forward.mask.ignored" not in found  # NaN is not mistaken for an unapplied mask


def test_declared_encoder_skips_the_causal_test():
    found, facts = probe("bidirectional_encoder")
    assert "skipped" in found["forward.mask.causal"].message
    assert "forward.mask.causal_leak" not in facts and errors(found) == []


def test_model_is_left_in_eval_mode_and_unchanged():
    from troubleshoot.probes.forward.model import model_for

    ctx = ProbeContext([], model_factory=f"{FACTORY}:correct_lm")
    masks.run(ctx)
    module = model_for(ctx).model.module
    assert not module.training
    assert all(p.grad is None for p in module.parameters())


# --- transformers checkpoints -------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["tiny_gpt2", "tiny_llama", "tiny_bert"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_healthy_transformers_models(tmp_path, arch, dtype):
    pytest.importorskip("transformers")
    import modelfactory

    torch.manual_seed(0)
    folder = modelfactory.save_hf(getattr(modelfactory, arch)(getattr(torch, dtype)), tmp_path / "ckpt")
    obs = masks.run(ProbeContext([Artifact(folder, "hf-checkpoint")]))
    found = {f.id: f for f in obs.findings}
    assert errors(found) == []
    facts = {k: v.value for k, v in obs.facts.items()}
    if arch == "tiny_bert":
        assert "bidirectional" in found["forward.mask.causal"].message
        assert facts == {k: v for k, v in ALL_CLEAR.items() if k != "forward.mask.causal_leak"}
    else:
        assert facts == ALL_CLEAR


def test_transformers_model_through_a_factory():
    pytest.importorskip("transformers")
    found, facts = probe("hf_gpt2")
    assert errors(found) == [] and facts == ALL_CLEAR
