"""Builders of real checkpoints for the checkpoint / config / weights / optimizer probe tests.

Everything is made here, from tiny transformers configs, nothing is downloaded: GPT-2 and Llama
folders saved with ``save_pretrained`` (single safetensors, sharded safetensors, and .bin the way
transformers 4 wrote them), a real few-step HF Trainer run for ``checkpoint-N`` folders, and
Megatron-DeepSpeed / Megatron-LM style folders. Fault injectors copy a healthy folder and break
one thing in it.

``get(name, tmp_path_factory)`` builds each artifact once per test session and hands out the
same path afterwards; tests that modify something call ``copy(...)`` first.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import torch

VOCAB = 100                   # 96 ordinary tokens + 4 specials
BOS, EOS, PAD, UNK = 97, 98, 99, 96
GPT2 = dict(vocab_size=VOCAB, n_embd=64, n_layer=4, n_head=4, n_positions=64,
            bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)
LLAMA = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, bos_token_id=BOS, eos_token_id=EOS,
             pad_token_id=PAD)

_BUILT: dict[str, Path] = {}


def get(name: str, tmp_path_factory) -> Path:
    """The artifact ``name`` (see BUILDERS), built once per session."""
    if name not in _BUILT:
        out = tmp_path_factory.mktemp(re.sub(r"\W", "_", name))
        _BUILT[name] = BUILDERS[name](out)
    return _BUILT[name]


def copy(src: Path, tmp_path_factory, label: str = "copy") -> Path:
    dst = tmp_path_factory.mktemp(label) / src.name
    (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    return dst


# --- models and tokenizers ---------------------------------------------------------------------

def tokenizer(eos: str = "</s>", pad: str | None = "<pad>", extra: int = 0):
    """A real fast tokenizer over t0..t95 (+ ``extra`` added tokens), saved as tokenizer.json + config."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(96)}
    vocab.update({"<unk>": UNK, "<s>": BOS, "</s>": EOS, "<pad>": PAD})
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token=eos, unk_token="<unk>",
                                  **({"pad_token": pad} if pad else {}))
    if extra:
        tok.add_tokens([f"<extra_{i}>" for i in range(extra)], special_tokens=True)
    return tok


def gpt2(seed: int = 0, **overrides):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(**{**GPT2, **overrides}))


def llama(seed: int = 0, **overrides):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**{**LLAMA, **overrides}))


def save_hf(model, out: Path, fmt: str = "safetensors", tok=None, special_tokens_map: bool = False) -> Path:
    """save_pretrained in one of: safetensors, sharded, bin, bin-sharded (+ tokenizer files)."""
    out.mkdir(parents=True, exist_ok=True)
    if fmt in ("safetensors", "sharded"):
        model.save_pretrained(out, max_shard_size="40KB" if fmt == "sharded" else "5GB")
    else:  # transformers 5 writes only safetensors: lay out .bin the way transformers 4 did
        model.config.save_pretrained(out)
        model.generation_config.save_pretrained(out)
        state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"
                 or not model.config.tie_word_embeddings}
        if fmt == "bin":
            torch.save(state, out / "pytorch_model.bin")
        else:
            names = sorted(state)
            parts = [names[i::3] for i in range(3)]
            weight_map = {}
            for i, part in enumerate(parts, 1):
                fname = f"pytorch_model-{i:05d}-of-00003.bin"
                torch.save({k: state[k] for k in part}, out / fname)
                weight_map.update({k: fname for k in part})
            (out / "pytorch_model.bin.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    if tok is not None:
        tok.save_pretrained(out)
        if special_tokens_map:  # transformers 4 wrote this file too
            (out / "special_tokens_map.json").write_text(json.dumps(
                {k: getattr(tok, k) for k in ("bos_token", "eos_token", "pad_token", "unk_token") if getattr(tok, k)}))
    return out


def trainer_run(out: Path, model=None, steps: int = 6, save_steps: int = 3, warmup_steps: int = 3,
                lr: float = 1e-3) -> Path:
    """A real HF Trainer run on random tokens; returns output_dir holding checkpoint-N folders."""
    import pytest

    pytest.importorskip("accelerate", reason="transformers' Trainer needs accelerate (pip install accelerate)")
    from transformers import Trainer, TrainingArguments

    model = model or gpt2()

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(0, 96, (16,), generator=g)
            return {"input_ids": ids, "labels": ids}

    args = TrainingArguments(output_dir=str(out), max_steps=steps, save_steps=save_steps, logging_steps=1,
                             per_device_train_batch_size=4, learning_rate=lr, warmup_steps=warmup_steps,
                             weight_decay=0.1, report_to=[], use_cpu=True, disable_tqdm=True, seed=0)
    Trainer(model=model, args=args, train_dataset=Tokens()).train()
    tokenizer().save_pretrained(out / f"checkpoint-{steps}")
    return out


# --- Megatron / DeepSpeed ------------------------------------------------------------------------

class LossScaler:
    """Stands in for DeepSpeed's scaler object: weights_only refuses any such class."""

    def __init__(self, scale: float = 4096.0):
        self.cur_scale = scale


def megatron_args(**overrides) -> argparse.Namespace:
    args = dict(hidden_size=64, num_layers=2, num_attention_heads=4, ffn_hidden_size=256, padded_vocab_size=128,
                seq_length=64, max_position_embeddings=64, init_method_std=0.02, fp16=True, bf16=False,
                apply_query_key_layer_scaling=True, attention_softmax_in_fp32=False, embed_layernorm=False,
                tensor_model_parallel_size=1, lr=6e-5, lr_warmup_iters=100, adam_beta1=0.9, adam_beta2=0.999,
                adam_eps=1e-8, weight_decay=0.1)
    args.update(overrides)
    return argparse.Namespace(**args)


def megatron_layer(h: int = 64, std: float = 0.02, n_layers: int = 2, ffn: int = 256) -> dict:
    out_std = std / math.sqrt(2 * n_layers)
    return {"input_layernorm.weight": torch.ones(h), "input_layernorm.bias": torch.zeros(h),
            "self_attention.query_key_value.weight": torch.randn(3 * h, h) * std,
            "self_attention.query_key_value.bias": torch.zeros(3 * h),
            "self_attention.dense.weight": torch.randn(h, h) * out_std, "self_attention.dense.bias": torch.zeros(h),
            "post_attention_layernorm.weight": torch.ones(h), "post_attention_layernorm.bias": torch.zeros(h),
            "mlp.dense_h_to_4h.weight": torch.randn(ffn, h) * std, "mlp.dense_h_to_4h.bias": torch.zeros(ffn),
            "mlp.dense_4h_to_h.weight": torch.randn(h, ffn) * out_std, "mlp.dense_4h_to_h.bias": torch.zeros(h)}


def megatron_deepspeed(out: Path, iterations=(100, 200), latest: int | str = 200, safe_args: bool = True,
                       nan_in_optimizer: bool = False) -> Path:
    """Megatron-DeepSpeed layout: latest + latest_checkpointed_iteration.txt, global_stepN/ with
    mp_rank_00_model_states.pt (args Namespace), layer_*-model_00-model_states.pt and ZeRO shards
    (bf16 shard readable; the fp16 one holds a scaler object and is refused)."""
    torch.manual_seed(0)
    out.mkdir(parents=True, exist_ok=True)
    for it in iterations:
        d = out / f"global_step{it}"
        d.mkdir()
        args = megatron_args() if safe_args else megatron_args(attn_mask_type=LossScaler())
        torch.save({"module": None, "args": args, "iteration": it, "checkpoint_version": 3.0,
                    "lr_scheduler": {"max_lr": 6e-5, "warmup_steps": 100, "num_steps": it, "decay_style": "cosine",
                                     "decay_steps": 1000, "min_lr": 6e-6},
                    "ds_config": {"fp16": {"enabled": True}}}, d / "mp_rank_00_model_states.pt")
        torch.save({"word_embeddings.weight": torch.randn(128, 64) * 0.02}, d / "layer_01-model_00-model_states.pt")
        for i in range(2):
            torch.save(megatron_layer(), d / f"layer_{i + 3:02d}-model_00-model_states.pt")
        torch.save({"final_layernorm.weight": torch.ones(64), "final_layernorm.bias": torch.zeros(64)},
                   d / "layer_06-model_00-model_states.pt")
        flat = torch.rand(10_000) * 1e-6
        if nan_in_optimizer:
            flat[17] = float("nan")
        state = {"state": {0: {"step": torch.tensor(float(it)), "exp_avg": torch.randn(10_000) * 1e-4,
                               "exp_avg_sq": flat}},
                 "param_groups": [{"lr": 6e-5, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.1, "params": [0]}]}
        torch.save({"optimizer_state_dict": {"base_optimizer_state": state, "clip_grad": 1.0}, "ds_version": "0.14"},
                   d / "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt")
        torch.save({"optimizer_state_dict": {"loss_scaler": LossScaler(), "base_optimizer_state": [state["state"][0]]}},
                   d / "zero_pp_rank_1_mp_rank_00_optim_states.pt")
    (out / "latest").write_text(latest if isinstance(latest, str) else f"global_step{latest}")
    (out / "latest_checkpointed_iteration.txt").write_text(str(latest).replace("global_step", ""))
    return out


def megatron_lm(out: Path, iteration: int = 300) -> Path:
    """Megatron-LM legacy layout: iter_0000300/mp_rank_00/model_optim_rng.pt with nested language_model."""
    torch.manual_seed(0)
    layer = {f"layers.{i}.{k}": v for i in range(2) for k, v in megatron_layer().items()}
    layer.update({"final_layernorm.weight": torch.ones(64), "final_layernorm.bias": torch.zeros(64)})
    model = {"language_model": {"embedding": {"word_embeddings": {"weight": torch.randn(128, 64) * 0.02},
                                              "position_embeddings": {"weight": torch.randn(64, 64) * 0.02}},
                                "encoder": layer}}
    opt = {"optimizer": {"state": {i: {"exp_avg": torch.zeros(4), "exp_avg_sq": torch.full((4,), 1e-6),
                                       "step": iteration} for i in range(3)},
                         "param_groups": [{"lr": 3e-5, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1,
                                           "params": [0, 1, 2]}]},
           "grad_scaler": {"scale": torch.tensor(0.5), "growth_tracker": torch.tensor(0)}}
    d = out / f"iter_{iteration:07d}" / "mp_rank_00"
    d.mkdir(parents=True)
    torch.save({"args": megatron_args(), "checkpoint_version": 3.0, "iteration": iteration, "model": model,
                "optimizer": opt, "opt_param_scheduler": {"max_lr": 6e-5, "lr_warmup_steps": 250, "num_steps": iteration,
                                                           "lr_decay_steps": 10_000, "lr_decay_style": "cosine"}},
               d / "model_optim_rng.pt")
    (out / "latest_checkpointed_iteration.txt").write_text(str(iteration))
    return out


# --- fault injectors ---------------------------------------------------------------------------

def edit_safetensors(folder: Path, fn: Callable[[str, torch.Tensor], torch.Tensor | None]) -> Path:
    """Rewrite every safetensors file of ``folder`` with ``fn(name, tensor)`` applied (None = unchanged)."""
    from safetensors.torch import load_file, save_file

    for f in sorted(folder.glob("*.safetensors")):
        state = load_file(str(f))
        meta = {"format": "pt"}
        for name in list(state):
            new = fn(name, state[name])
            if new is not None:
                state[name] = new.contiguous()
        save_file(state, str(f), metadata=meta)
    return folder


def edit_json(path: Path, **values) -> Path:
    data = json.loads(path.read_text())
    data.update(values)
    path.write_text(json.dumps(data, indent=2))
    return path


class MarkerBomb:
    """A pickle payload that would create ``marker`` if anything ever unpickled it unsafely."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def malicious_pt(out: Path, marker: Path) -> Path:
    torch.save({"weight": torch.zeros(2, 2), "payload": MarkerBomb(marker)}, out)
    return out


# --- many small tensors (memory per tensor, bench/bench_many_tensors.py) -----------------------

MANY_LAYOUTS = ("pt", "safetensors", "hf-sharded", "optimizer")
NAN_AT = 77  # the tensor (or parameter state) holding one NaN


def many_tensors(out: Path, layout: str, n: int) -> Path:
    """``n`` tensors of shape (4,), one of them with a NaN, saved as ``layout``: one .pt state
    dict, one .safetensors, an HF folder of 4 safetensors shards with its index, or an Adam
    state dict with ``n`` parameter states (step, exp_avg, exp_avg_sq each)."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    values = torch.randn(n, 4, generator=g) * 0.02
    values[NAN_AT, 1] = math.nan
    if layout == "optimizer":
        state = {i: {"step": torch.tensor(10.0), "exp_avg": values[i].clone(), "exp_avg_sq": values[i].abs() ** 2}
                 for i in range(n)}
        torch.save({"state": state, "param_groups": [{"lr": 3e-4, "betas": (0.9, 0.999), "eps": 1e-8,
                                                       "weight_decay": 0.0, "params": list(range(n))}]},
                   out / "optimizer.pt")
        return out / "optimizer.pt"
    tensors = {f"blocks.{i}.w": values[i].clone() for i in range(n)}
    if layout == "pt":
        torch.save(tensors, out / "model.pt")
        return out / "model.pt"
    if layout == "safetensors":
        save_file(tensors, str(out / "model.safetensors"))
        return out / "model.safetensors"
    names, weight_map = list(tensors), {}
    for k in range(4):
        shard = f"model-{k + 1:05d}-of-00004.safetensors"
        part = names[k::4]
        save_file({name: tensors[name] for name in part}, str(out / shard), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, shard))
    (out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (out / "config.json").write_text(json.dumps({"model_type": "gpt2", **GPT2}))
    return out


# --- named artifacts ---------------------------------------------------------------------------

def _gpt2_safetensors(out):
    return save_hf(gpt2(), out / "gpt2", tok=tokenizer())


def _gpt2_sharded(out):
    return save_hf(gpt2(), out / "gpt2-sharded", "sharded", tok=tokenizer(), special_tokens_map=True)


def _gpt2_bin(out):
    return save_hf(gpt2(), out / "gpt2-bin", "bin", tok=tokenizer())


def _gpt2_bin_sharded(out):
    return save_hf(gpt2(), out / "gpt2-bin-sharded", "bin-sharded", tok=tokenizer())


def _llama_safetensors(out):
    return save_hf(llama(), out / "llama", tok=tokenizer(), special_tokens_map=True)


def _llama_sharded(out):
    return save_hf(llama(), out / "llama-sharded", "sharded", tok=tokenizer())


BUILDERS: dict[str, Callable[[Path], Path]] = {
    "gpt2-safetensors": _gpt2_safetensors,
    "gpt2-sharded": _gpt2_sharded,
    "gpt2-bin": _gpt2_bin,
    "gpt2-bin-sharded": _gpt2_bin_sharded,
    "llama-safetensors": _llama_safetensors,
    "llama-sharded": _llama_sharded,
    "trainer-output": lambda out: trainer_run(out / "output"),
    "megatron-deepspeed": lambda out: megatron_deepspeed(out / "megatron-ds"),
    "megatron-lm": lambda out: megatron_lm(out / "megatron-lm"),
}
HEALTHY = ("gpt2-safetensors", "gpt2-sharded", "gpt2-bin", "gpt2-bin-sharded", "llama-safetensors", "llama-sharded",
           "trainer-output", "megatron-deepspeed")
