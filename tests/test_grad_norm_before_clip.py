"""A report that clipping "does not work" because the logged grad_norm stays above max_grad_norm:
the HF Trainer, TRL, LLaMA-Factory and torchtitan log the norm before clipping, so the knowledge
reads that complaint (lossspike.clip_looks_ineffective) and ranks the benign explanation first,
while a real spike or clipping that is really off keeps it down."""
from __future__ import annotations

import pytest
from asking import ranked as _ranked

from troubleshoot.evidence import extract
from troubleshoot.knowledge import load

CAUSE = "loss-spike.grad-norm-logged-before-clip"


@pytest.fixture(scope="module")
def kb():
    return load()


def clip_complaint(kb, text: str):
    hit = extract(kb, text).facts.get("lossspike.clip_looks_ineffective")
    return hit.value if hit else None


@pytest.mark.parametrize("text", [
    "Trainer max_grad_norm=1.0 but the logged grad_norm is often 15, gradient clipping is not working?",
    "I set max_grad_norm=1.0 and gradient_clipping=1.0 in ds_config, many printed grad_norm values are greater than 1.0",
    "the grad_norm is larger than the clipping threshold on most steps",
    "clip grad not working with accelerate and deepspeed zero3",
    "LLaMA-Factory sft 设置 max_grad_norm 1.0 不起作用，grad_norm 还是大于 1",
    "max_grad_norm设置了没用",
])
def test_the_clipping_complaint_is_read(kb, text):
    assert clip_complaint(kb, text) is True


@pytest.mark.parametrize("text", [
    "without gradient clipping the loss spiked at step 7000",
    "grad_norm exploded to 3000 at step 500 and the loss spiked to 11",
    "max_grad_norm=1.0, lr 2e-5, loss spike at step 7000 with grad_norm 300",
    "max_grad_norm is ignored when using DeepSpeed",
])
def test_other_grad_norm_talk_is_not_the_complaint(kb, text):
    assert clip_complaint(kb, text) is None


@pytest.mark.parametrize("text", [
    "Training Qwen with deepspeed: max_grad_norm=1.0 yet many printed grad_norm values are greater than 1.0, "
    "does clipping not work?",
    "LLaMA-Factory sft 设置 max_grad_norm 1.0 不起作用，日志里 grad_norm 还是大于 1",
])
def test_the_complaint_ranks_the_pre_clip_reading_first(text):
    assert _ranked(text)[0] == CAUSE


def test_clipping_really_off_keeps_it_down():
    ranked = _ranked("Loss spike at step 7000, grad norm 3000, trained without gradient clipping "
                     "(max_grad_norm=0).")
    assert CAUSE not in ranked[:3]
