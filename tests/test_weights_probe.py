"""Weights probe on real tiny checkpoints: each injected fault gives its finding and its fact."""
from __future__ import annotations

import math
import warnings

import pytest
import torch

import ckptfactory as F
from troubleshoot.loaders import detect
from troubleshoot.loaders.checkpoint import open_checkpoint, weight_shapes
from troubleshoot.probes import ProbeContext, config, weights
from troubleshoot.probes.weights import classify

warnings.filterwarnings("ignore", category=UserWarning)


def probe(path, module=weights):
    return module.run(ProbeContext([detect(path)]))


def ids(obs, severity=None):
    return {f.id for f in obs.findings if severity in (None, f.severity)}


@pytest.mark.parametrize("name", F.HEALTHY)
def test_healthy_has_no_error(art, name):
    obs = probe(art(name))
    assert not ids(obs, "error"), [f for f in obs.findings if f.severity == "error"]
    assert obs.facts["weights.nonfinite"].value is False
    assert obs.facts["weights.zero_tensors"].value == 0


def test_healthy_gpt2_init_is_read_as_fresh(art):
    obs = probe(art("gpt2-safetensors"))
    f = obs.facts
    assert f["weights.early_checkpoint"].value is True and "exactly 1.0" in f["weights.early_checkpoint"].note
    assert f["weights.init_std"].value == pytest.approx(0.02, rel=0.05)
    assert f["weights.init_std_ratio"].value == pytest.approx(0.02 / math.sqrt(2 / (5 * 64)), rel=0.05)
    assert f["weights.output_layers_scaled"].value is True  # GPT-2 divides c_proj by sqrt(2*n_layer)
    assert f["weights.output_std_ratio"].value == pytest.approx(1 / math.sqrt(8), rel=0.1)
    assert f["model.has_embed_layernorm"].value is False
    per_layer = next(x for x in obs.findings if x.id == "weights.init_std").value["per_layer"]
    assert sorted(per_layer) == [0, 1, 2, 3]


def test_llama_outputs_are_not_depth_scaled(art):
    """HF's Llama init uses one std for every Linear: reported (warning), never an error."""
    obs = probe(art("llama-safetensors"))
    assert obs.facts["weights.output_layers_scaled"].value is False
    assert [f.severity for f in obs.findings if f.id == "weights.output_unscaled"] == ["warning"]


def test_nan_weight(fresh):
    folder = F.edit_safetensors(fresh("gpt2-safetensors"), lambda n, t: t.index_put_(
        (torch.tensor([0, 1, 2]), torch.tensor([5, 6, 7])), torch.tensor(float("nan"))) if n.endswith("h.1.mlp.c_fc.weight") else None)
    obs = probe(folder)
    bad = [f for f in obs.findings if f.id == "weights.nonfinite"]
    assert [(f.severity, f.where, f.value["nan"]) for f in bad] == [
        ("error", "model.safetensors:transformer.h.1.mlp.c_fc.weight", 3)]
    assert obs.facts["weights.nonfinite"].value is True and obs.facts["weights.nonfinite_tensors"].value == 1


def test_inf_weight_in_bin(fresh):
    folder = fresh("gpt2-bin")
    sd = torch.load(folder / "pytorch_model.bin", weights_only=True)
    sd["transformer.h.0.attn.c_attn.weight"][0, 0] = float("inf")
    torch.save(sd, folder / "pytorch_model.bin")
    obs = probe(folder)
    bad = [f for f in obs.findings if f.id == "weights.nonfinite"]
    assert [(f.where, f.value["inf"]) for f in bad] == [("pytorch_model.bin:transformer.h.0.attn.c_attn.weight", 1)]


def test_inflated_init_std(tmp_path):
    folder = F.save_hf(F.gpt2(initializer_range=0.5), tmp_path / "big-init", tok=F.tokenizer())
    obs = probe(folder)
    f = next(x for x in obs.findings if x.id == "weights.init_std")
    assert f.severity == "error" and "freshly initialised" in f.message  # says which step it assumed
    assert obs.facts["weights.init_std_ratio"].value == pytest.approx(0.5 / math.sqrt(2 / 320), rel=0.05)
    assert obs.facts["weights.init_std_ratio"].value > 3
    cfg = probe(folder, config)
    assert cfg.facts["model.initializer_range"].value == 0.5
    assert [x.severity for x in cfg.findings if x.id == "config.initializer_range"] == ["warning"]


def test_weights_inflated_behind_the_configs_back(fresh):
    folder = F.edit_safetensors(fresh("gpt2-safetensors"),
                                lambda n, t: t * 20 if n.endswith(("c_attn.weight", "c_fc.weight")) else None)
    obs = probe(folder)
    assert "weights.init_std_config" in ids(obs, "warning")
    assert obs.facts["weights.init_std"].value == pytest.approx(0.4, rel=0.05)


def test_unscaled_output_layers(fresh):
    folder = F.edit_safetensors(fresh("gpt2-safetensors"),
                                lambda n, t: torch.randn_like(t) * 0.02 if n.endswith("c_proj.weight") else None)
    obs = probe(folder)
    assert obs.facts["weights.output_layers_scaled"].value is False
    assert obs.facts["weights.output_std_ratio"].value == pytest.approx(1.0, rel=0.1)
    f = next(x for x in obs.findings if x.id == "weights.output_unscaled")
    assert f.value["target"] == pytest.approx(1 / math.sqrt(8), rel=1e-3)


def test_fp16_overflow(fresh):
    folder = F.edit_safetensors(fresh("gpt2-safetensors"),
                                lambda n, t: t.index_fill_(0, torch.tensor([0]), 7.0e4) if n.endswith("h.2.mlp.c_fc.weight") else None)
    obs = probe(folder)  # run precision: fp32 config -> a warning about the fp16 range only
    assert "weights.fp16_range" in ids(obs, "warning") and "weights.fp16_overflow" not in obs.facts
    assert obs.facts["weights.max_abs"].value == pytest.approx(7.0e4)
    F.edit_json(folder / "config.json", dtype="float16")
    obs = probe(folder)
    f = next(x for x in obs.findings if x.id == "weights.fp16_overflow")
    assert f.severity == "error" and f.where == "model.safetensors:transformer.h.2.mlp.c_fc.weight"
    assert obs.facts["weights.fp16_overflow"].value is True


def test_zero_tensor(fresh):
    folder = F.edit_safetensors(fresh("gpt2-safetensors"),
                                lambda n, t: torch.zeros_like(t) if n.endswith("h.3.mlp.c_fc.weight") else None)
    obs = probe(folder)
    f = next(x for x in obs.findings if x.id == "weights.constant_tensor")
    assert f.where.endswith("h.3.mlp.c_fc.weight") and "all zero" in f.message
    assert obs.facts["weights.zero_tensors"].value == 1


def test_trained_checkpoint_skips_init_audit(art, fresh):
    folder = fresh("trainer-output") / "checkpoint-6"
    F.edit_json(folder / "trainer_state.json", global_step=50_000)
    obs = probe(folder)
    assert obs.facts["weights.early_checkpoint"].value is False
    assert "step 50000 from trainer_state.json global_step" in obs.facts["weights.early_checkpoint"].note
    assert "weights.init_std_ratio" not in obs.facts and "weights.init_audit_skipped" in ids(obs, "info")
    early = probe(art("trainer-output"))
    assert "step 6 from checkpoint-6/trainer_state.json" in early.facts["weights.early_checkpoint"].note


def test_fine_tune_of_trained_weights_is_not_early(fresh):
    folder = F.edit_safetensors(fresh("gpt2-safetensors"), lambda n, t: t * 0.3 + 0.2 if n.endswith("ln_1.weight") else None)
    obs = probe(folder)
    assert obs.facts["weights.early_checkpoint"].value is False


def test_megatron_naming_and_layers(art):
    obs = probe(art("megatron-deepspeed"))
    f = obs.facts
    assert f["weights.output_layers_scaled"].value is True  # dense / dense_4h_to_h at sigma/sqrt(2L)
    assert f["weights.output_std_ratio"].value == pytest.approx(0.5, rel=0.1)
    assert "global_step200" in f["weights.early_checkpoint"].note
    assert f["weights.fp16_overflow"].value is False  # run is fp16 (args.fp16)
    per_layer = next(x for x in obs.findings if x.id == "weights.init_std").value["per_layer"]
    assert sorted(per_layer) == [3, 4]  # from layer_03 / layer_04 file names


def test_embedding_layernorm_detected(tmp_path):
    from transformers import BloomConfig, BloomForCausalLM

    torch.manual_seed(0)
    model = BloomForCausalLM(BloomConfig(vocab_size=100, hidden_size=64, n_layer=2, n_head=4))
    obs = probe(F.save_hf(model, tmp_path / "bloom"))
    assert obs.facts["model.has_embed_layernorm"].value is True
    assert "weights.no_embed_norm" not in ids(obs)


@pytest.mark.parametrize("name,role", [
    ("transformer.h.0.attn.c_attn.weight", "hidden"), ("transformer.h.0.attn.c_proj.weight", "output"),
    ("transformer.h.0.mlp.c_fc.weight", "hidden"), ("transformer.h.0.mlp.c_proj.weight", "output"),
    ("model.layers.3.self_attn.q_proj.weight", "hidden"), ("model.layers.3.self_attn.o_proj.weight", "output"),
    ("model.layers.3.mlp.gate_proj.weight", "hidden"), ("model.layers.3.mlp.down_proj.weight", "output"),
    ("layers.0.self_attention.query_key_value.weight", "hidden"), ("layers.0.self_attention.dense.weight", "output"),
    ("layers.0.mlp.dense_h_to_4h.weight", "hidden"), ("layers.0.mlp.dense_4h_to_h.weight", "output"),
    ("decoder.layers.0.self_attention.linear_qkv.weight", "hidden"), ("decoder.layers.0.mlp.linear_fc2.weight", "output"),
    ("transformer.wte.weight", "embedding"), ("model.embed_tokens.weight", "embedding"), ("lm_head.weight", "lm_head"),
    ("transformer.word_embeddings_layernorm.weight", "embed_norm"), ("model.layers.0.input_layernorm.weight", "norm"),
    ("transformer.h.0.ln_1.weight", "norm"), ("transformer.ln_f.bias", "norm_bias"), ("h.0.attn.c_attn.bias", "bias"),
    ("transformer.wpe.weight", "position"),
])
def test_classify(name, role):
    assert classify(name, 1 if role in ("norm", "embed_norm", "norm_bias", "bias") else 2) == role


def test_progress_callback(art):
    calls = []
    weights.run(ProbeContext([detect(art("gpt2-sharded"))], progress=lambda *a: calls.append(a)))
    assert len(calls) == len(weight_shapes(open_checkpoint(art("gpt2-sharded"))))  # one call per tensor
    assert calls[-1][0] <= calls[-1][1] and calls[-1][0] > 0.9 * calls[-1][1]
