"""Config probe: model.* facts, special-token agreement across files, vocab vs embedding rows."""
from __future__ import annotations

import json
import math
import warnings

import ckptfactory as F
import pytest

from troubleshoot.loaders import detect
from troubleshoot.probes import ProbeContext, config, run_all

warnings.filterwarnings("ignore", category=UserWarning)


def probe(path):
    return config.run(ProbeContext([detect(path)]))


def found(obs, id):
    return [f for f in obs.findings if f.id == id]


@pytest.mark.parametrize("name", F.HEALTHY)
def test_healthy_has_no_error(art, name):
    obs = probe(art(name))
    assert not [f for f in obs.findings if f.severity == "error"]


def test_model_facts_from_hf_config(art):
    obs = probe(art("llama-safetensors"))
    v = {k: f.value for k, f in obs.facts.items()}
    assert (v["model.hidden_size"], v["model.num_layers"], v["model.num_heads"]) == (64, 4, 4)
    assert v["model.hidden_depth_ratio"] == 16.0 and v["model.initializer_range"] == 0.02
    assert v["model.vocab_size"] == v["model.embedding_rows"] == v["model.tokenizer_size"] == 100
    assert v["model.pretrained_dtype"] == "fp32" and v["model.norm_position"] == "pre"
    assert v["model.eos_mismatch"] is False and v["model.pad_is_eos"] is False and v["model.vocab_mismatch"] is False
    assert obs.facts["model.eos_mismatch"].note == "config.json, generation_config.json, tokenizer_config.json, special_tokens_map.json"
    assert all(f.source == "probe:config" for f in obs.facts.values())


def test_model_facts_from_megatron_args(art):
    v = {k: f.value for k, f in probe(art("megatron-deepspeed")).facts.items()}
    assert (v["model.hidden_size"], v["model.num_layers"], v["model.vocab_size"]) == (64, 2, 128)
    assert v["model.pretrained_dtype"] == "fp16" and v["model.initializer_range"] == 0.02
    assert v["model.embedding_rows"] == 128 and v["model.has_embed_layernorm"] is False


def test_eos_mismatch_generation_config(fresh):
    folder = fresh("llama-safetensors")
    F.edit_json(folder / "generation_config.json", eos_token_id=[5, 6])
    obs = probe(folder)
    f = found(obs, "config.eos_mismatch")[0]
    assert f.severity == "error" and f.where == "generation_config.json"
    assert f.value == {"config.json": [98], "generation_config.json": [5, 6], "tokenizer_config.json": [98],
                       "special_tokens_map.json": [98]}
    assert obs.facts["model.eos_mismatch"].value is True


def test_eos_list_containing_the_tokenizer_eos_is_fine(fresh):
    folder = fresh("llama-safetensors")
    F.edit_json(folder / "generation_config.json", eos_token_id=[98, 5])
    assert probe(folder).facts["model.eos_mismatch"].value is False


def test_eos_mismatch_tokenizer(tmp_path):
    folder = F.save_hf(F.gpt2(), tmp_path / "m", tok=F.tokenizer(eos="t3"))
    obs = probe(folder)
    f = found(obs, "config.eos_mismatch")[0]
    assert "tokenizer_config.json=[3] ('t3')" in f.message and obs.facts["model.eos_mismatch"].value is True


def test_pad_is_eos(tmp_path):
    folder = F.save_hf(F.gpt2(pad_token_id=F.EOS), tmp_path / "m", tok=F.tokenizer(pad="</s>"))
    obs = probe(folder)
    f = found(obs, "config.pad_is_eos")[0]
    assert f.severity == "info" and f.value == F.EOS  # released models ship so; the batch probe judges the collator
    assert obs.facts["model.pad_is_eos"].value is True


def test_vocab_larger_than_embedding(tmp_path):
    folder = F.save_hf(F.gpt2(), tmp_path / "m", tok=F.tokenizer(extra=8))
    obs = probe(folder)
    f = found(obs, "config.vocab_mismatch")[0]
    assert f.severity == "error" and f.where == "model.safetensors:transformer.wte.weight"
    assert f.value == {"tokenizer_size": 108, "embedding_rows": 100}
    v = {k: x.value for k, x in obs.facts.items()}
    assert (v["model.tokenizer_size"], v["model.embedding_rows"], v["model.vocab_mismatch"]) == (108, 100, True)


def test_special_id_beyond_embedding(fresh):
    folder = fresh("gpt2-sharded")
    F.edit_json(folder / "generation_config.json", eos_token_id=50256)
    obs = probe(folder)
    assert found(obs, "config.special_id_out_of_range")[0].value == {"generation_config.json:eos_token_id": 50256}
    assert obs.facts["model.vocab_mismatch"].value is True


def test_config_vocab_differs_from_rows(fresh):
    folder = fresh("gpt2-bin")
    F.edit_json(folder / "config.json", vocab_size=120)
    assert found(probe(folder), "config.vocab_size_rows")[0].value == {"vocab_size": 120, "rows": 100}


def test_chat_template_end_of_turn_not_eos(fresh):
    folder = fresh("llama-safetensors")
    tc = json.loads((folder / "tokenizer_config.json").read_text())
    tc["added_tokens_decoder"] = {"95": {"content": "<|eot_id|>", "special": True}}
    tc["chat_template"] = "{% for m in messages %}{{ m['content'] }}<|eot_id|>{% endfor %}"
    (folder / "tokenizer_config.json").write_text(json.dumps(tc))
    obs = probe(folder)
    f = found(obs, "config.eos_mismatch")[0]
    assert f.severity == "warning" and f.value["chat_template"] == [95] and "'<|eot_id|>'" in f.message
    assert obs.facts["model.eos_mismatch"].value is True


def _config_only(tmp_path, **cfg):
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return probe(tmp_path)


def test_large_wide_model(tmp_path):
    """tr8-104B's first design: 16384 wide, 32 deep, initializer_range 0.02."""
    obs = _config_only(tmp_path, model_type="gpt2", n_embd=16384, n_layer=32, n_head=32, vocab_size=50257,
                       initializer_range=0.02, torch_dtype="float16")
    assert found(obs, "config.hidden_depth_ratio")[0].value == 512.0
    f = found(obs, "config.initializer_range")[0]
    assert f.severity == "info" and "training from scratch" in f.message  # an HF config's value seeds new modules only
    assert f.value["formula"] == pytest.approx(math.sqrt(2 / (5 * 16384)), rel=1e-4)
    assert obs.facts["model.pretrained_dtype"].value == "fp16" and found(obs, "config.fp16")
    assert obs.facts["model.params_estimate"].value > 100e9


def test_post_ln_and_unscaled_attention(tmp_path):
    obs = _config_only(tmp_path / "a", model_type="bert", hidden_size=1024, num_hidden_layers=48)
    assert obs.facts["model.norm_position"].value == "post" and found(obs, "config.post_ln")
    bert_large = _config_only(tmp_path / "a24", model_type="bert", hidden_size=1024, num_hidden_layers=24)
    assert not found(bert_large, "config.post_ln")  # BERT-Large itself trained fine post-LN
    obs = _config_only(tmp_path / "b", model_type="opt", hidden_size=64, num_hidden_layers=2, do_layer_norm_before=False)
    assert obs.facts["model.norm_position"].value == "post"
    obs = _config_only(tmp_path / "c", model_type="gpt2", n_embd=64, n_layer=2, scale_attn_weights=False,
                       scale_attn_by_inverse_layer_idx=True)
    assert obs.facts["model.attn_scaled"].value is False and found(obs, "config.attn_unscaled")
    assert found(obs, "config.attention_options")[0].value == {"scale_attn_weights": False,
                                                               "scale_attn_by_inverse_layer_idx": True}
    obs = _config_only(tmp_path / "d", model_type="olmo2", hidden_size=64, num_hidden_layers=2)
    assert obs.facts["model.qk_layernorm"].value is True


def test_loader_issues_reported_once(tmp_path):
    """The loader's own findings come from the loader step of run_all, not from any one probe."""
    root = F.megatron_deepspeed(tmp_path / "ds", latest=300)
    assert not found(probe(root), "checkpoint.latest_missing")
    obs = run_all(ProbeContext([detect(root)]))
    assert len(found(obs, "checkpoint.latest_missing")) == 2
    assert len(found(obs, "checkpoint.unsafe_pickle_refused")) == 1


def test_config_json_alone(art):
    a = detect(art("llama-safetensors") / "config.json")
    assert (a.kind, a.detail) == ("hf-checkpoint", "config.json only: weights not probed")
    obs = config.run(ProbeContext([a]))
    assert obs.facts["model.hidden_size"].value == 64 and obs.facts["model.eos_mismatch"].value is False
    assert "model.embedding_rows" not in obs.facts
