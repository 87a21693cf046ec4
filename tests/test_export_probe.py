"""Saved-model audits (weights probe) and MoE router settings (config probe) on checkpoints built
here with transformers and PEFT-style files: a ZeRO-3-style empty save, a broken tie, added chat
tokens whose rows were never trained, LoRA adapters with and without their new tokens, a Mixtral
config without its balancing loss. Each fault ranks its cause first; the healthy twin stays quiet.
"""
from __future__ import annotations

import json
from pathlib import Path

import ckptfactory as F
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from troubleshoot import cli
from troubleshoot.observations import Artifact
from troubleshoot.probes import ProbeContext, config, weights

CHAT = ("{% for m in messages %}{% if m['role'] == 'user' %}<|user|>{% else %}<|assistant|>{% endif %}\n"
        "{{ m['content'] }}</s>\n{% endfor %}")


def run(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli.main, [*args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def facts(family, folder: Path) -> dict:
    obs = family.run(ProbeContext([Artifact(str(folder), "hf-checkpoint", "")]))
    return {k: f.value for k, f in obs.facts.items()}, {f.id: f for f in obs.findings}


def chat_checkpoint(out: Path, *, train_new_rows: bool) -> Path:
    """A Llama whose tokenizer gained <|user|> / <|assistant|> and a chat template using them;
    the two new embedding rows are either left at zero (never trained) or filled like the others."""
    tok = F.tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<|user|>", "<|assistant|>"]})
    tok.chat_template = CHAT
    model = F.llama()
    model.resize_token_embeddings(len(tok))
    emb = model.get_input_embeddings().weight
    with torch.no_grad():
        for name, p in model.named_parameters():  # a trained base: norm gains have moved off 1.0
            if "norm" in name:
                p.mul_(1 + 0.3 * torch.rand_like(p))
        new = emb[-2:]
        new.copy_(torch.randn_like(new) * emb[:-2].std() if train_new_rows else torch.zeros_like(new))
    return F.save_hf(model, out, tok=tok)


def test_untrained_chat_token_rows(tmp_path):
    folder = chat_checkpoint(tmp_path / "ckpt", train_new_rows=False)
    found, by_id = facts(weights, folder)
    assert found["weights.untrained_token_rows"] == 2
    assert "<|assistant|>" in by_id["weights.untrained_tokens"].message
    _code, data = run("ask", "loss becomes nan after a few steps", "--no-input", "--probe", str(folder))
    assert data["causes"][0]["id"] == "nan-loss.untrained-special-tokens"


def test_trained_chat_token_rows_are_quiet(tmp_path):
    found, by_id = facts(weights, chat_checkpoint(tmp_path / "ckpt", train_new_rows=True))
    assert found["weights.untrained_token_rows"] == 0 and "weights.untrained_tokens" not in by_id


def test_zero3_style_empty_save(tmp_path):
    """What a rank's module state_dict holds under ZeRO-3 without gathering: shape-[0] placeholders."""
    folder = F.save_hf(F.llama(), tmp_path / "ckpt", tok=F.tokenizer())
    sd = load_file(str(folder / "model.safetensors"))
    save_file({k: (torch.empty(0, dtype=v.dtype) if "layers" in k else v) for k, v in sd.items()},
              str(folder / "model.safetensors"))
    found, by_id = facts(weights, folder)
    assert found["weights.empty_tensors"] == sum("layers" in k for k in sd)
    assert by_id["weights.empty_tensors"].severity == "error"
    code, data = run("probe", "--static", str(folder))
    assert code == 1 and data["causes"][0]["id"] == "save-export.zero3-empty-save"


def test_broken_tie(tmp_path):
    folder = F.save_hf(F.gpt2(), tmp_path / "ckpt", tok=F.tokenizer())  # GPT-2 ties lm_head to wte
    sd = load_file(str(folder / "model.safetensors"))
    sd["lm_head.weight"] = sd["transformer.wte.weight"] + 0.01 * torch.randn_like(sd["transformer.wte.weight"])
    save_file(sd, str(folder / "model.safetensors"))
    found, _by_id = facts(weights, folder)
    assert found["weights.tie_broken"] is True
    _code, data = run("ask", "the saved model outputs garbage after loading", "--no-input", "--probe", str(folder))
    assert data["causes"][0]["id"] == "save-export.tied-embeddings-broken"


@pytest.mark.parametrize("model", ["gpt2", "llama"])
def test_healthy_checkpoints_keep_their_tie_and_rows(tmp_path, model):
    folder = F.save_hf(getattr(F, model)(), tmp_path / "ckpt", tok=F.tokenizer())
    found, by_id = facts(weights, folder)
    assert found["weights.empty_tensors"] == 0 and not found.get("weights.tie_broken", False)
    assert not {"weights.empty_tensors", "weights.tie_broken", "weights.untrained_tokens"} & by_id.keys()


def lora_adapter(out: Path, *, embeddings: bool, new_tokens: int = 2) -> Path:
    """The files PEFT's save_pretrained writes for a LoRA on q_proj / v_proj, plus the tokenizer."""
    out.mkdir(parents=True)
    h, r = 64, 8
    sd = {}
    for layer in range(2):
        for proj in ("q_proj", "v_proj"):
            base = f"base_model.model.model.layers.{layer}.self_attn.{proj}"
            sd[f"{base}.lora_A.weight"] = torch.randn(r, h) * 0.01
            sd[f"{base}.lora_B.weight"] = torch.randn(h, r) * 0.01
    if embeddings:
        sd["base_model.model.model.embed_tokens.weight"] = torch.randn(F.VOCAB + new_tokens, h) * 0.02
        sd["base_model.model.lm_head.weight"] = torch.randn(F.VOCAB + new_tokens, h) * 0.02
    save_file(sd, str(out / "adapter_model.safetensors"))
    (out / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "r": r, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"],
        "base_model_name_or_path": "tiny-llama", "task_type": "CAUSAL_LM",
        "modules_to_save": ["embed_tokens", "lm_head"] if embeddings else None}))
    tok = F.tokenizer()
    tok.add_tokens([f"<tool_{i}>" for i in range(new_tokens)])
    tok.save_pretrained(out)
    return out


def test_adapter_without_its_new_tokens(tmp_path):
    folder = lora_adapter(tmp_path / "adapter", embeddings=False)
    found, by_id = facts(weights, folder)
    assert found["weights.lora_target_count"] == 2 and found["weights.lora_saves_embeddings"] is False
    assert found["export.only_adapter_files"] is True
    assert by_id["weights.lora_adapter"].severity == "warning" and "q_proj" in by_id["weights.lora_adapter"].message
    _code, data = run("ask", "added special tokens lost after reloading the lora model", "--no-input",
                     "--probe", str(folder), "--answer", "export.resized_embeddings=true")
    assert data["causes"][0]["id"] == "save-export.new-tokens-not-saved"


def test_adapter_with_its_embeddings(tmp_path):
    found, by_id = facts(weights, lora_adapter(tmp_path / "adapter", embeddings=True))
    assert found["weights.lora_saves_embeddings"] is True and by_id["weights.lora_adapter"].severity == "info"


def mixtral(out: Path, **overrides) -> Path:
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    cfg = MixtralConfig(vocab_size=F.VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                        max_position_embeddings=64, **overrides)
    return F.save_hf(MixtralForCausalLM(cfg), out, tok=F.tokenizer())


def test_mixtral_config_without_router_logits(tmp_path):
    folder = mixtral(tmp_path / "moe")
    found, by_id = facts(config, folder)
    assert found["model.moe.num_experts"] == 4 and found["model.moe.top_k"] == 2
    assert found["model.moe.output_router_logits"] is False and found["model.moe.router_aux_loss_coef"] == 0.001
    assert by_id["config.moe_router"].severity == "info"  # released Mixtral configs say false too
    _code, data = run("ask", "MoE experts collapse after fine-tuning", "--no-input", "--probe", str(folder),
                      "--answer", "train.stage=sft")  # the config counts only for a fine-tune (a released default)
    assert data["causes"][0]["id"] == "moe-routing.aux-loss-off"



def test_a_zero_balancing_coefficient_counts_only_for_a_fine_tune(tmp_path):
    """Released configs ship router_aux_loss_coef 0 (Qwen3-Coder-30B-A3B): a plain probe of the
    model informs; a run known to be a fine-tune that keeps it has no balancing term at all."""
    folder = mixtral(tmp_path / "moe", router_aux_loss_coef=0.0)
    found, by_id = facts(config, folder)
    assert found["model.moe.router_aux_loss_coef"] == 0 and by_id["config.moe_router"].severity == "info"
    _code, data = run("probe", "--static", str(folder))
    assert [c["id"] for c in data["causes"] if c["status"] == "confirmed"] == []
    _code, data = run("ask", "MoE experts collapse after fine-tuning", "--no-input", "--probe", str(folder),
                      "--answer", "train.stage=sft")
    assert data["causes"][0]["id"] == "moe-routing.aux-loss-off" and data["causes"][0]["status"] == "confirmed"

def test_mixtral_config_with_router_logits_is_info_only(tmp_path):
    found, by_id = facts(config, mixtral(tmp_path / "moe", output_router_logits=True))
    assert found["model.moe.output_router_logits"] is True and by_id["config.moe_router"].severity == "info"


def test_dense_config_has_no_router_facts(tmp_path):
    found, by_id = facts(config, F.save_hf(F.llama(), tmp_path / "ckpt", tok=F.tokenizer()))
    assert not any(k.startswith("model.moe.") for k in found) and "config.moe_router" not in by_id


def test_attention_implementation_and_softcapping(tmp_path):
    folder = F.save_hf(F.llama(), tmp_path / "ckpt", tok=F.tokenizer())
    F.edit_json(folder / "config.json", attn_implementation="flash_attention_2", attn_logit_softcapping=50.0)
    found, _ = facts(config, folder)
    assert found["model.attn_implementation"] == "flash_attention_2" and found["model.attn_softcapping"] is True
