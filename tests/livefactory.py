"""Tiny training runs for the live-guard tests: a GPT-2 built from a config (nothing downloaded),
learnable token batches, and the faults the guard must catch.

Batches are arithmetic sequences modulo the vocabulary (``(a + b*t) % V``), so the loss falls
steadily and a healthy run has no plateau or spike of its own. Faults, each on one batch:

    nan_embeds      the batch feeds ``inputs_embeds`` holding one NaN (a NaN in the inputs path)
    out_of_range    one token id equals the vocabulary size (IndexError on CPU)
    all_ignored     every label is -100 (no supervised token: 0/0 in the mean loss)
    transient_nan   a one-off NaN from a forward hook that fires once (does not replay)
"""
from __future__ import annotations

import torch
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB, SEQ, ROWS = 64, 16, 4


def tiny_gpt2(seed: int = 0) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=0, eos_token_id=0, pad_token_id=0, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config)


def sequence(gen: torch.Generator) -> list[int]:
    a, b = torch.randint(0, VOCAB, (2,), generator=gen).tolist()
    return [(a + (b % 7 + 1) * t) % VOCAB for t in range(SEQ)]


def batch(gen: torch.Generator, rows: int = ROWS) -> dict:
    ids = torch.tensor([sequence(gen) for _ in range(rows)])
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def nan_embeds(model, b: dict) -> dict:
    embeds = model.get_input_embeddings()(b["input_ids"]).detach().clone()
    embeds[0, 2, 5] = float("nan")
    return {"inputs_embeds": embeds, "attention_mask": b["attention_mask"], "labels": b["labels"]}


def out_of_range(model, b: dict) -> dict:
    b["input_ids"][1, 3] = VOCAB
    return b


def all_ignored(model, b: dict) -> dict:
    b["labels"][:] = -100
    return b


def transient_nan(model, b: dict) -> dict:
    arm_transient(model)
    b["labels"] = b["input_ids"]  # sharing input_ids' storage, as many loops do (the bundle must cope)
    return b


def arm_transient(model) -> None:
    """A hook that turns block 1's MLP output into NaN on its next call only."""
    fired = []

    def hook(module, args, out):
        if not fired:
            fired.append(True)
            return out * float("nan")
        return None

    model.transformer.h[1].mlp.register_forward_hook(hook)


FAULTS = {"nan_embeds": nan_embeds, "out_of_range": out_of_range, "all_ignored": all_ignored,
          "transient_nan": transient_nan}
