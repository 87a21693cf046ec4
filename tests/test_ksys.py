"""Knowledge added from the ksys survey of public tracker threads (system-failure, eval-oom,
save-export, tp-mismatch, preference-divergence): an engine release that is wrong only under
tensor parallelism, GRPO rollouts whose reward is constant or cut off by the length limit, a GPU
out-of-memory report on consumer cards, tokenisation that outlasts the collective timeout, and
the merge refusals of quantized bases.

The words set their facts, near misses do not, and short reports written for this test in the
words such reports use rank the cause in the top 3 of `llmfix ask --no-input --json`."""

import pytest
from asking import ranked

from troubleshoot.evidence import extract

FACT_CASES = [
    # the release the fault starts with
    ("train.after_upgrade", "Mixtral AWQ answers are garbage with -tp 4 since vllm 0.9.1"),
    ("train.after_upgrade", "bad answers in version 0.5.1 and later, 0.4.1 was fine"),
    ("train.after_upgrade", "从0.7.2版本开始多卡推理就乱码了"),
    ("train.after_upgrade", "0.6.0版本正常，升到0.6.3版本就乱码"),
    # right at TP=1, wrong at TP>1, in the order people write it
    ("tp.diverges_only_with_tp", "the answer is correct with TP=1, but garbled with TP=2"),
    ("tp.diverges_only_with_tp", "generation is broken when tensor_parallel_size >= 2"),
    # every group of completions scored alike
    ("prefdiv.group_reward_constant", "{'loss': 0.0, 'grad_norm': 0.0, 'reward': 0.0, 'reward_std': 0.0, 'frac_reward_zero_std': 1.0}"),
    ("prefdiv.group_reward_constant", "GRPO 训练时 reward_std 一直为0"),
    ("prefdiv.group_reward_constant", "all the completions get the same reward in every group"),
    # rollouts stopped by the length limit
    ("prefdiv.completions_truncated", "'completions/mean_length': 512.0, 'completions/clipped_ratio': 1.0, 'completions/mean_terminated_length': 0.0"),
    ("prefdiv.completions_truncated", "every completion was truncated at max_completion_length before the boxed answer"),
    ("prefdiv.completions_truncated", "GRPO 生成的回答全部被截断了"),
    # the GPU ran out of memory, however it is said
    ("system.gpu_oom", "lora微调7B，8块3090，每张卡显存都要爆了"),
    ("system.gpu_oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
    ("system.gpu_oom", "gpu memory explodes after a few hundred steps"),
    # tokenisation longer than the collective timeout
    ("system.fails_during_preprocessing", "全量微调8卡，分词要花很长时间，每次30分钟左右就报 NCCL timeout"),
    ("system.fails_during_preprocessing", "tokenizing the 5 GB corpus takes longer than the 1800 s ddp timeout on rank 0"),
    # an evaluation that generates
    ("evaloom.generates", "llamafactory-cli train --stage sft --do_predict --per_device_eval_batch_size 32"),
    # a framework refusing to merge into quantized weights
    ("export.merged_into_quantized", "AssertionError: quant_method: gptq, quantized model and does not support merge-lora."),
    ("export.merged_into_quantized", "ValueError: Cannot merge LORA layers when the model is gptq quantized"),
]


@pytest.mark.parametrize("fact, text", FACT_CASES)
def test_the_words_set_the_fact(shipped_kb, fact, text):
    assert extract(shipped_kb, text).facts[fact].value is True


NEAR_MISSES = [
    # a version named without a fault, or a fault without a version boundary
    ("train.after_upgrade", "I have been using vllm since 0.6.0 for serving"),
    ("train.after_upgrade", "the output is wrong with tensor_parallel_size 2"),
    # right on both sides
    ("tp.diverges_only_with_tp", "outputs are correct with TP=1 and with TP=2 alike"),
    # a group with spread, a few clipped completions
    ("prefdiv.group_reward_constant", "{'reward': 0.41, 'reward_std': 0.37, 'frac_reward_zero_std': 0.25}"),
    ("prefdiv.completions_truncated", "'completions/clipped_ratio': 0.05, 'completions/mean_terminated_length': 211.4"),
    # memory that is fine, or host RAM
    ("system.gpu_oom", "显存占用 20G，训练正常"),
    ("system.gpu_oom", "the process was killed by the host OOM killer, dmesg says out of memory: Killed process"),
    # slow tokenisation that finishes
    ("system.fails_during_preprocessing", "tokenization takes a long time but finishes and training starts"),
    # an adapter merged into full-precision weights
    ("export.merged_into_quantized", "merged the lora into the bf16 base with merge_and_unload and saved it"),
]


@pytest.mark.parametrize("fact, text", NEAR_MISSES)
def test_near_misses_set_nothing(shipped_kb, fact, text):
    assert fact not in extract(shipped_kb, text).facts


REPORTS = [
    ("Serving a GPTQ Llama-3-70B with vllm: since upgrading to 0.10.1 the answers are nonsense with "
     "--tensor-parallel-size 4, the same model is correct with tensor-parallel-size 1 and with vllm 0.9.2",
     "tp-mismatch.framework-regression"),
    ("升级 vllm 到新版本之后，tp=2 部署 qwen2.5-32b-awq 输出乱码，tp=1 正常，回退到 0.8.5 就好了",
     "tp-mismatch.framework-regression"),
    ("GRPO on math word problems with an exact-answer reward learns nothing. Log every step: 'reward': 0.0, "
     "'reward_std': 0.0, 'frac_reward_zero_std': 1.0, 'completions/clipped_ratio': 1.0, 'loss': 0.0, 'grad_norm': 0.0",
     "preference-divergence.reward-never-fires"),
    ("qlora 4bit 训练完之后 swift export --merge_lora true 报错 AssertionError: quant_method: bnb, quantized model and "
     "does not support merge-lora.", "save-export.lora-merge-4bit"),
    ("两张4090做lora微调qwen2-7b，batch 4，cutoff_len 4096，第一步就爆显存 torch.OutOfMemoryError",
     "system-failure.train-oom"),
    ("8卡全量微调，数据量很大，分词需要很长时间，每次到30分钟就报 Watchdog caught collective operation timeout",
     "system-failure.preprocessing-timeout"),
]


@pytest.mark.parametrize("report, cause", REPORTS)
def test_the_report_ranks_the_cause_in_the_top_3(report, cause):
    top = ranked(report)[:3]
    assert cause in top, top


def test_a_tp_gap_in_every_release_is_not_a_regression():
    """Without a release boundary, wrong TP output stays with the parallel layers, not the engine release."""
    top = ranked("my own column parallel and row parallel layers give a wrong loss with tp=2, tp=1 is correct")
    assert top[0] != "tp-mismatch.framework-regression", top[:3]


def test_an_oom_on_consumer_cards_is_not_a_transport_failure():
    top = ranked("lora微调Llama-3.1-8B，用了4块4090，为什么每个GPU显存都要爆了")
    assert top[0] == "system-failure.train-oom", top[:3]
