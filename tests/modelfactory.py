"""Tiny models for the model-running probes, each with one known fault (or none).

Every function without arguments here is also a ``--model-factory`` target, both as
``modelfactory:correct_lm`` (with tests/ on sys.path) and ``tests/modelfactory.py:correct_lm``.

``TinyLM`` is a GPT-style causal LM small enough to run in milliseconds: learned positions,
pre-LN blocks, hand-written attention so each mask bug can be switched on:

    correct_lm          all invariants hold, all grads flow
    mask_ignoring_lm    attention_mask is accepted and never applied
    leaky_lm            bidirectional attention in a model that says it is causal
    flipped_mask_lm     mask convention flipped: adds mask * -1e4 instead of (1 - mask) * -1e4
    neg_inf_mask_lm     padding by masked_fill(-inf): left padding spreads NaN to real tokens
    neg_inf_mask_1layer_lm  the same with one layer: NaN stays in the all-zero row
    batch_mixing_lm     subtracts the batch mean: rows influence each other
    position_blind_lm   takes position_ids and ignores them (arange positions)
    frozen_lm           every parameter has requires_grad=False
    adapter_lm          frozen base + trainable LoRA-style adapters (healthy)
    dead_layer_lm       block 1's residual branch multiplied by 0
    fp16_overflow_lm    a layer scales activations by 1e5 inside block 0's MLP
    fp16_overflow_half_lm  the same in float16: overflows to inf in its own dtype
    nan_weight_lm       one NaN in blocks.1.mlp.fc1.weight
    *_bf16              correct_lm, leaky_lm, flipped_mask_lm in bfloat16
    hf_gpt2             a transformers GPT-2 (needs transformers)

``tiny_gpt2 / tiny_llama / tiny_bert`` build transformers models from configs (nothing is
downloaded); ``save_hf(model, folder)`` writes an HF checkpoint folder.
"""
from __future__ import annotations

import math

import torch
from torch import nn

VOCAB, DIM, LAYERS, HEADS, POSITIONS = 64, 32, 2, 2, 64


class Scale(nn.Module):
    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor


class LoRALinear(nn.Module):
    """A frozen Linear plus a trainable low-rank update B @ A (B starts at zero, as in PEFT)."""

    def __init__(self, base: nn.Linear, rank: int = 2) -> None:
        super().__init__()
        self.base = base
        self.lora_A = nn.Parameter(torch.randn(rank, base.in_features) * 0.02)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))

    def forward(self, x):
        return self.base(x) + x @ self.lora_A.t() @ self.lora_B.t()


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, bias, fill):
        """``bias``: additive [B, 1, T, T] (0 or -1e4); ``fill``: bool [B, 1, T, T] set to -inf."""
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(x).split(d, -1))
        s = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads) + bias
        s = s.masked_fill(fill, float("-inf"))
        return self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, dim: int, scale: float | None = None) -> None:
        super().__init__()
        self.scale = Scale(scale) if scale else nn.Identity()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(self.scale(x))))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, scale: float | None = None, dead: bool = False) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = MLP(dim, scale)
        self.gate = 0.0 if dead else 1.0

    def forward(self, x, bias, fill):
        h = self.attn(self.ln_1(x), bias, fill)
        h = h + self.mlp(self.ln_2(x + h))
        return x + self.gate * h


class TinyLM(nn.Module):
    """GPT-style LM; ``mask`` picks how attention_mask is applied: keep1 | ignore | flipped | neg_inf."""

    def __init__(self, *, causal: bool = True, mask: str = "keep1", dead_layer: int | None = None,
                 scale: float | None = None, batch_mix: bool = False, use_position_ids: bool = True,
                 layers: int = LAYERS, dim: int = DIM) -> None:
        super().__init__()
        self.is_causal = True          # what the model claims (the probes trust it)
        self.vocab_size, self.initializer_range = VOCAB, 0.02
        self.attend_causal, self.mask_mode = causal, mask
        self.batch_mix, self.use_position_ids = batch_mix, use_position_ids
        self.wte, self.wpe = nn.Embedding(VOCAB, dim), nn.Embedding(POSITIONS, dim)
        self.blocks = nn.ModuleList(
            Block(dim, HEADS, scale if i == 0 else None, dead=i == dead_layer) for i in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, VOCAB, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=self.initializer_range)

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        b, t = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if position_ids is None or not self.use_position_ids:
            position_ids = torch.arange(t, device=input_ids.device).expand(b, t)
        x = self.wte(input_ids) + self.wpe(position_ids)
        keys = attention_mask[:, None, None, :].to(x.dtype)
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        fill = future.expand(b, 1, t, t) if self.attend_causal else torch.zeros(b, 1, t, t, dtype=torch.bool, device=x.device)
        bias = torch.zeros_like(keys)
        if self.mask_mode == "keep1":
            bias = (1.0 - keys) * -1e4
        elif self.mask_mode == "flipped":
            bias = keys * -1e4
        elif self.mask_mode == "neg_inf":
            fill = fill | (keys == 0)
        for block in self.blocks:
            x = block(x, bias, fill)
            if self.batch_mix:
                x = x - 0.5 * x.mean(0, keepdim=True)
        return self.head(self.ln_f(x))


def correct_lm() -> TinyLM:
    return TinyLM()


def mask_ignoring_lm() -> TinyLM:
    return TinyLM(mask="ignore")


def leaky_lm() -> TinyLM:
    return TinyLM(causal=False)


def flipped_mask_lm() -> TinyLM:
    return TinyLM(mask="flipped")


def neg_inf_mask_lm() -> TinyLM:
    return TinyLM(mask="neg_inf")


def neg_inf_mask_1layer_lm() -> TinyLM:
    """One layer: the NaN of an all-zero row stays in that row (no next layer to spread it)."""
    return TinyLM(mask="neg_inf", layers=1)


def batch_mixing_lm() -> TinyLM:
    return TinyLM(batch_mix=True)


def position_blind_lm() -> TinyLM:
    return TinyLM(use_position_ids=False)


def bidirectional_encoder() -> TinyLM:
    """A declared encoder (``is_causal = False``): the causal test must be skipped."""
    model = TinyLM(causal=False)
    model.is_causal = False
    return model


def frozen_lm() -> TinyLM:
    return TinyLM().requires_grad_(False)


def adapter_lm() -> TinyLM:
    model = TinyLM().requires_grad_(False)
    for block in model.blocks:
        block.attn.qkv = LoRALinear(block.attn.qkv)
    return model


def dead_layer_lm() -> TinyLM:
    return TinyLM(dead_layer=1)


def fp16_overflow_lm() -> TinyLM:
    return TinyLM(scale=1e5)


def fp16_overflow_half_lm() -> TinyLM:
    return TinyLM(scale=1e5).half()


def nan_weight_lm() -> TinyLM:
    model = TinyLM()
    with torch.no_grad():
        model.blocks[1].mlp.fc1.weight[0, 0] = float("nan")
    return model


def correct_lm_bf16() -> TinyLM:
    return TinyLM().to(torch.bfloat16)


def leaky_lm_bf16() -> TinyLM:
    return TinyLM(causal=False).to(torch.bfloat16)


def flipped_mask_lm_bf16() -> TinyLM:
    return TinyLM(mask="flipped").to(torch.bfloat16)


def not_a_module():
    return {"weights": 1}


# --- transformers models from configs -------------------------------------------------------

def tiny_gpt2(dtype=torch.float32):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=LAYERS, n_embd=DIM, n_head=HEADS, vocab_size=VOCAB, n_positions=POSITIONS,
                     bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg).to(dtype)


def tiny_llama(dtype=torch.float32):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(num_hidden_layers=LAYERS, hidden_size=DIM, intermediate_size=2 * DIM,
                      num_attention_heads=HEADS, num_key_value_heads=1, vocab_size=VOCAB,
                      max_position_embeddings=POSITIONS, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return LlamaForCausalLM(cfg).to(dtype)


def tiny_bert(dtype=torch.float32):
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(num_hidden_layers=LAYERS, hidden_size=DIM, intermediate_size=2 * DIM,
                     num_attention_heads=HEADS, vocab_size=VOCAB, max_position_embeddings=POSITIONS)
    return BertForMaskedLM(cfg).to(dtype)


def hf_gpt2():
    return tiny_gpt2()


def save_hf(model, folder) -> str:
    """save_pretrained with the model's dtype recorded in config.json; returns the folder."""
    model.config.dtype = next(model.parameters()).dtype
    model.save_pretrained(str(folder))
    return str(folder)
