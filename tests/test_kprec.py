"""Knowledge added from the kprec survey of public tracker threads (nan-loss, fp16-overflow,
zero-loss, bad-init): the sampling error a bf16-released model gives when it is loaded in float16
for generation, and the words reports use for it.

The words set their facts, near misses do not, and short reports written for this test in the
words such reports use rank the cause in the top 3 of `llmfix ask --no-input --json`."""

import pytest
from asking import fact_value, ranked

FACT_CASES = [
    # torch.multinomial's refusal, pasted with and without the backticks, and the CUDA assert form
    ("forward.sampling_nonfinite",
     "    next_tokens = torch.multinomial(probs, num_samples=1).squeeze(1)\n"
     "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"),
    ("forward.sampling_nonfinite", "推理时报错 RuntimeError: probability tensor contains either inf, nan or element < 0"),
    ("forward.sampling_nonfinite",
     "../aten/src/ATen/native/cuda/TensorCompare.cu:110: _assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] "
     "Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed."),
]


@pytest.mark.parametrize("fact, text", FACT_CASES)
def test_the_words_set_the_fact(shipped_kb, fact, text):
    assert fact_value(shipped_kb, text, fact) is True


NEAR_MISSES = [
    # the other multinomial error: all probabilities zero, not NaN
    ("forward.sampling_nonfinite", "RuntimeError: invalid multinomial distribution (sum of probabilities <= 0)"),
    # a NaN loss in training says nothing about sampling
    ("forward.sampling_nonfinite", "the loss is nan after 200 steps and the probability of each class looks fine"),
]


@pytest.mark.parametrize("fact, text", NEAR_MISSES)
def test_near_misses_set_nothing(shipped_kb, fact, text):
    assert fact_value(shipped_kb, text, fact) is None


RANKED = [
    # a bf16-released chat model loaded in float16 for generation
    ("fp16-overflow.bf16-weights-in-fp16",
     "generate() crashes after the first few tokens\n"
     "I load Qwen2-7B-Instruct with torch_dtype=torch.float16 and call model.generate(do_sample=True):\n"
     "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"),
    ("fp16-overflow.bf16-weights-in-fp16",
     "微调后推理报错\nLoRA 合并以后用 cli_demo 推理，报 RuntimeError: probability tensor contains either inf, nan or element < 0，"
     "加载时用的是 torch.float16"),
]


# One fault seen from two symptoms: the report lists whichever twin fits its symptom best.
TWINS = {"fp16-overflow.bf16-weights-in-fp16": {"fp16-overflow.bf16-weights-in-fp16", "nan-loss.fp16-on-bf16-model"}}


@pytest.mark.parametrize("cause, report", RANKED)
def test_a_short_report_ranks_the_cause_in_the_top_3(cause, report):
    top = ranked(report)[:3]
    assert TWINS.get(cause, {cause}) & set(top), top
