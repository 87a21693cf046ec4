"""Knowledge from the nan-loss / fp16-overflow / zero-loss survey of session 2026-11-24 sixth:
NaN from fp16 autocast in models not released in bf16 (nan-loss.amp-fp16-overflow, the same fault
as fp16-overflow.activation-overflow), the AMP fact it reads, and the zero-loss view of a bf16
model run in fp16 declared the same fault as its fp16-overflow and nan-loss views. The wording
below is written for these tests (EN and ZH), with near misses that must leave the fact unset."""
from __future__ import annotations

import pytest
from asking import causes, fact_value, ranked

from troubleshoot.engine import twins
from troubleshoot.knowledge import load


@pytest.fixture(scope="module")
def kb():
    return load()


# --- train.amp_autocast -----------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "the forward pass runs inside with torch.cuda.amp.autocast(): and a GradScaler",
    "I wrap the model call in torch.autocast('cuda') to save memory",
    "python train.py --amp --batch_size 256",
    "config: use_amp: True, epochs: 300",
    "we use automatic mixed precision to speed up the ViT",
    "为了省显存开启了amp，训练到第50个epoch loss变成nan",
    "训练时使用了自动混合精度",
])
def test_amp_is_read(kb, text):
    assert fact_value(kb, text, "train.amp_autocast") is True


@pytest.mark.parametrize("text", [
    "use_amp=False and the loss is still nan",
    "training without AMP, plain fp32 from the start",
    "关闭amp之后还是nan",
    "the sample training loop from the example folder",
    "amplitude of the gradients looks fine",
])
def test_other_wording_is_not_amp(kb, text):
    assert fact_value(kb, text, "train.amp_autocast") is not True


# --- nan-loss.amp-fp16-overflow -----------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Training a Swin vision transformer from scratch with torch.cuda.amp autocast and GradScaler: "
    "the loss is fine for 120 epochs, then becomes nan and stays nan.",
    "用 AMP 混合精度训练自己改的 Mamba 分割网络，训练到第80个epoch时 loss 突然变成 nan",
])
def test_an_amp_nan_report_ranks_the_overflow_in_the_top_3(text):
    # listed under nan-loss or, when the report fits fp16-overflow better, as its twin there
    top = causes(text)[:3]
    assert any("nan-loss.amp-fp16-overflow" in (c["id"], *c["same_fault"]) for c in top)


def test_a_bf16_released_llm_points_to_its_own_cause_first():
    text = "Fine-tuning Qwen2-7B with --fp16 on V100: loss becomes nan after 300 steps."
    ids = ranked(text)
    assert ids.index("nan-loss.fp16-on-bf16-model") < ids.index("nan-loss.amp-fp16-overflow")


def test_the_overflow_is_one_fault_with_its_fp16_view(kb):
    assert "fp16-overflow.activation-overflow" in twins(kb)["nan-loss.amp-fp16-overflow"]


# --- zero-loss.fp16-kernel-overflow --------------------------------------------------------------

def test_zero_loss_from_fp16_on_a_bf16_model_is_one_fault_with_its_other_views(kb):
    group = twins(kb)["zero-loss.fp16-kernel-overflow"]
    assert {"fp16-overflow.bf16-weights-in-fp16", "nan-loss.fp16-on-bf16-model"} <= group

