"""Knowledge added from the kprec survey of public tracker threads (nan-loss, fp16-overflow,
zero-loss, bad-init): the sampling error a bf16-released model gives when it is loaded in float16
for generation, Adam's epsilon reported as rounding to 0 in fp16, optimizer states said to be kept
in fp16, and the settings that split a sequence's labels across ranks (context parallelism).

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
    # a report that traces the NaN to epsilon underflow, in its several wordings
    ("nanloss.eps_underflow", "the default eps=1e-8 underflows in FP16, so the second moment division blows up"),
    ("nanloss.eps_underflow", "Adam adds epsilon to the denominator, but float16 will round any number smaller than 6e-8 to 0"),
    ("nanloss.eps_underflow", "in fp16 1e-8 rounds to zero, so the epsilon is gone"),
    ("nanloss.eps_underflow", "Adam 的 eps 在半精度下会下溢变成0"),
    # optimizer states said to live in fp16
    ("nanloss.pure_fp16_optimizer", "we do pure fp16 training to fit the 13B model on 8 GPUs"),
    ("nanloss.pure_fp16_optimizer", "the Adam states are kept in fp16 to save memory"),
    ("nanloss.pure_fp16_optimizer", "为了省显存用的纯fp16训练"),
    # settings that split one sequence's tokens (and labels) across ranks
    ("nanloss.prompt_masking", "eval_loss is nan as soon as I turn on context parallel with cp=2"),
    ("nanloss.prompt_masking", "swift sft --model Qwen/Qwen2.5-7B --sequence_parallel_size 4 --packing true"),
    ("nanloss.prompt_masking", "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2"),
]


@pytest.mark.parametrize("fact, text", FACT_CASES)
def test_the_words_set_the_fact(shipped_kb, fact, text):
    assert fact_value(shipped_kb, text, fact) is True


NEAR_MISSES = [
    # the other multinomial error: all probabilities zero, not NaN
    ("forward.sampling_nonfinite", "RuntimeError: invalid multinomial distribution (sum of probabilities <= 0)"),
    # a NaN loss in training says nothing about sampling
    ("forward.sampling_nonfinite", "the loss is nan after 200 steps and the probability of each class looks fine"),
    # an epsilon that is merely set, and a loss that is rounded for display
    ("nanloss.eps_underflow", "I set eps to 1e-6 and lr to 1e-5 but the loss still goes nan"),
    ("nanloss.eps_underflow", "eps=1e-8, weight decay 0.01, fp16 mixed precision, the logged loss rounds to 2 decimals"),
    # ordinary mixed precision keeps fp32 master weights
    ("nanloss.pure_fp16_optimizer", "fp16 mixed precision with fp32 master weights and a GradScaler"),
    # Megatron-LM's sequence parallelism shards activations, not the sequences the loss sees
    ("nanloss.prompt_masking", "--tensor-model-parallel-size 4 --sequence-parallel --bf16"),
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
    # epsilon rounding to zero in a half-precision reward model
    ("nan-loss.adam-eps",
     "reward model training: all parameters become NaN after the first optimizer step\n"
     "The model is loaded in float16 and trained with Adam; I think eps=1e-8 underflows to 0 in fp16."),
    # a shard without labels under context parallelism
    ("nan-loss.no-target-tokens",
     "eval loss nan with context parallel\n"
     "Full fine-tune with FSDP and context parallel size 2: the train loss is fine but eval_loss is nan every time. "
     "Prompts are masked with -100."),
]


# One fault seen from two symptoms: the report lists whichever twin fits its symptom best.
TWINS = {"fp16-overflow.bf16-weights-in-fp16": {"fp16-overflow.bf16-weights-in-fp16", "nan-loss.fp16-on-bf16-model"}}


@pytest.mark.parametrize("cause, report", RANKED)
def test_a_short_report_ranks_the_cause_in_the_top_3(cause, report):
    top = ranked(report)[:3]
    assert TWINS.get(cause, {cause}) & set(top), top
