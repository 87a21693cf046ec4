"""Corrected advice stays corrected (issue 12, "gives wrong or dangerous advice", items 1-10).

Each test reads the shipped knowledge as a user sees it (fix steps, summaries, evidence texts,
articles) and fails if a corrected statement comes back. The primary source of each correction
is named in docs/calibration.md.
"""
from __future__ import annotations

import re

import pytest

from troubleshoot.knowledge import knowledge_root


def texts(kb) -> list[str]:
    """Every user-visible sentence of rules/ and kb/, one entry per step / field / article line."""
    out = []
    for s in kb.symptoms.values():
        out += [s.summary] + [c.ask for c in s.checks] + [c.how for c in s.checks]
    for c in kb.causes.values():
        out += [c.title, c.summary, c.not_this_when or ""] + [e.says for e in c.evidence]
    for f in kb.fixes.values():
        out += [f.title, *f.steps] + [a.text for a in f.did_not_work]
    for path in (knowledge_root() / "kb").glob("*.md"):
        # paragraphs and list items: a flag and the fork it belongs to travel together
        out += re.split(r"\n\n|\n(?=\d+\. |- )", path.read_text(encoding="utf-8"))
    return [" ".join(t.split()) for t in out if t]  # wrapped lines read as one sentence


def with_(kb, needle: str) -> list[str]:
    return [t for t in texts(kb) if needle in t]


def test_1_never_drop_scheduler_pt(shipped_kb):
    assert not [t for t in with_(shipped_kb, "scheduler.pt") if re.search(r"(drop|delete|remove)\S* `?scheduler\.pt", t)]
    step = " ".join(shipped_kb.fixes["fix-spike-lower-lr"].steps)
    assert "only when both files exist" in step and "base_lrs" in step


@pytest.mark.parametrize("flag, fork", [
    ("--override-lr-scheduler", "Megatron-DeepSpeed"),           # 2: upstream renamed it in 2022
    ("--skip-train-iteration-range", "Megatron-DeepSpeed"),      # 4: BigScience's fork
    ("--override-opt_param-scheduler", "Megatron-LM"),
    ("--iterations-to-skip", "Megatron-LM"),
])
def test_2_4_every_flag_names_its_fork(shipped_kb, flag, fork):
    found = with_(shipped_kb, flag)
    assert found and all(fork in t for t in found), [t[:120] for t in found if fork not in t]


def test_3_nan_check_is_not_a_flag_to_add(shipped_kb):
    found = [t for t in texts(shipped_kb) if re.search(r"(?<!no-)check-for-nan-in-loss-and-grad", t)]
    assert found == []
    assert with_(shipped_kb, "--no-check-for-nan-in-loss-and-grad")


def test_5_query_key_layer_scaling_leaves_attention_unchanged(shipped_kb):
    found = with_(shipped_kb, "apply-query-key-layer-scaling") + with_(shipped_kb, "apply_query_key_layer_scaling`")
    explained = [t for t in found if "layer number" in t]
    assert explained and all("unchanged" in t and "fp32" in t for t in explained)


def test_6_gradient_accumulation_fix_is_not_just_446(shipped_kb):
    step = " ".join(shipped_kb.fixes["fix-plateau-ga-normalisation"].steps)
    assert "average_tokens_across_devices" in step and "#37197" in step
    assert not with_(shipped_kb, "4.46+")


def test_7_bf16_full_finetune_keeps_fp32_master_weights(shipped_kb):
    first = shipped_kb.fixes["fix-fp16-use-bf16"].steps[0]
    assert "float32" in first and "torch_dtype=torch.bfloat16" not in first


def test_8_batch_lr_rule_is_square_root_or_linear_not_2_3x(shipped_kb):
    for t in with_(shipped_kb, "2-3x") + with_(shipped_kb, "x2-3"):
        assert "folk heuristic" in t or "upper bound" in t, t[:160]
    assert not with_(shipped_kb, "Rule of thumb: when the batch doubles, raise the LR 2-3x")


def test_9_find_unused_parameters_warns_about_reentrant_checkpointing(shipped_kb):
    steps = " ".join(shipped_kb.fixes["fix-nograd-unused-modules"].steps)
    assert "Expected to mark a variable ready only once" in steps and "use_reentrant" in steps
    article = [t for t in with_(shipped_kb, "ddp_find_unused_parameters=True") if t.startswith("7.")]
    assert article and all("Expected to mark a variable ready only" in t for t in article)


@pytest.mark.parametrize("wrong, right", [
    ("--initial-loss-scale 65536", "2^32"),                       # Megatron's default is 2**32
    ("weights and activations that exceed", "rarely weights"),    # bf16 models overflow in activations
    ("BLOOM-13B", "tr1-13B"),
    ("it was the first suggestion", "third hypothesis"),
])
def test_10_smaller_corrections(shipped_kb, wrong, right):
    everything = "\n".join(texts(shipped_kb))
    assert wrong not in everything and right in everything


def test_10_gqa_permute_uses_kv_heads(shipped_kb):
    assert "num_key_value_heads" in " ".join(shipped_kb.fixes["fix-tp-conversion-permute"].steps)


def test_10_older_pytorch_flight_recorder_variables(shipped_kb):
    step = " ".join(shipped_kb.fixes["fix-system-debug-collective-hang"].steps)
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" in step and "TORCH_NCCL_DUMP_ON_TIMEOUT" in step
