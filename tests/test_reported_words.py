"""How reports of NaN, fp16-overflow and zero losses are worded, and what that buys.

Every cause of the three symptoms carries phrases from several public threads (`reported_as`);
a report written in the vocabulary those threads share (the GPU, the trainer, the error words)
leans towards the cause the threads established, even when no pattern reads it. The GPUs
without bf16 that the quantised-training threads name (a Colab T4, an RTX 2070, a GTX 16xx) set
`zeroloss.gpu_pre_ampere` like a V100 does. A NaN that eager attention cures is the attention
kernel's (nan-loss.attention-kernel), as the zero loss one is.
"""
from __future__ import annotations

import pytest
from asking import causes

from troubleshoot.evidence import lexical
from troubleshoot.knowledge import load

SYMPTOMS = ("nan-loss", "fp16-overflow", "zero-loss")


@pytest.fixture(scope="module")
def kb():
    return load()


def test_every_cause_has_phrases_from_several_threads(kb):
    """A cause with no phrases loses the shared-words comparison to siblings that have them."""
    thin = {cid: len(c.reported_as) for cid, c in kb.causes.items()
            if c.symptom in SYMPTOMS and len({s for r in c.reported_as for s in r.sources}) < 4}
    assert not thin


@pytest.mark.parametrize("symptom, report, cause", [
    ("zero-loss", "chatglm3 qlora with quantization_bit 4 on two V100 cards, the loss is 0.0 from the start",
     "zero-loss.quantized-on-old-gpu"),
    ("zero-loss", "after upgrading deepspeed to 0.14 with zero2, loss 0 on 8 GPUs", "zero-loss.framework-regression"),
    ("nan-loss", "resumed from the checkpoint and the loss is nan at once, the optimizer state has nan",
     "nan-loss.nonfinite-weights"),
    ("nan-loss", "uncorrectable ECC error on one node, then nan", "nan-loss.hardware-fault"),
    ("nan-loss", "Megatron run in bf16: grad norm nan but skipped iterations stays 0", "nan-loss.unchecked-bf16-nan"),
    ("nan-loss", "dreambooth with xformers on a 3090: loss=nan after some steps", "nan-loss.attention-kernel"),
    ("fp16-overflow", "Current loss scale already at minimum - cannot decrease scale anymore",
     "fp16-overflow.loss-scale-collapse"),
    ("fp16-overflow", "ValueError: Attempting to unscale FP16 gradients with LoRA", "fp16-overflow.fp16-master-weights"),
])
def test_reporters_words_favour_the_established_cause(kb, symptom, report, cause):
    """Words several threads of one cause share lift that cause above all its siblings."""
    factors = lexical.overlaps(kb, report, [cid for cid, c in kb.causes.items() if c.symptom == symptom])
    assert max(factors, key=lambda cid: factors[cid].factor) == cause
    assert factors[cause].factor > 1


@pytest.mark.parametrize("report", [
    "loss 变成了 nan，关闭 flash attention 后 loss 正常了",
    "the loss turns nan after 30 steps; switching to eager attention fixed it",
])
def test_a_nan_that_eager_attention_cures_is_the_kernel(report):
    """The eager-attention test decides between the kernel and the other NaN causes."""
    first = causes(report)[0]
    assert first["id"] == "nan-loss.attention-kernel"
    assert first["status"] == "likely"  # read from text (trust 0.8): only a measurement confirms
