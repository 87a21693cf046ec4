"""Knowledge added from the k2a survey of public tracker threads (second wave on system-failure,
eval-oom, save-export, tp-mismatch, preference-divergence): a tied-embedding fine-tune whose
extra lm_head a serving engine rejects, a reward model too weak to steer PPO, an accuracy reward
that stays near zero, a process ended by SIGKILL reported only by its exit code, and an RL rollout
engine that reserves the GPU memory the trainer needs.

The words set their facts, near misses do not, and short reports written for this test in the
words such reports use rank the cause in the top 3 of `llmfix ask --no-input --json`."""

import pytest
from asking import ranked

from troubleshoot.evidence import extract

FACT_CASES = [
    # the engine's loader has no lm_head for a tied model
    ("export.lm_head_rejected_on_load",
     '  File "/opt/venv/lib/python3.10/site-packages/vllm/model_executor/models/gemma.py", line 339, in load_weights\n'
     "    param = params_dict[name]\nKeyError: 'lm_head.weight'"),
    ("export.lm_head_rejected_on_load", "ValueError: There is no module or parameter named 'lm_head' in GemmaForCausalLM"),
    # the kernel's OOM killer, reported by the exit code only
    ("system.killed_signal9", "after a few hours on CPU the run stops with ERROR: error code -9"),
    ("system.killed_signal9", "Process finished with exit code 137 (interrupted by signal 9: SIGKILL)"),
    # a reward model near chance
    ("prefdiv.reward_model_weak", "I think the reward model was not trained well enough before PPO"),
    ("prefdiv.reward_model_weak", "the RM eval accuracy is only 0.58 on the validation pairs"),
    ("prefdiv.reward_model_weak", "奖励模型没有训练好，PPO 效果很差"),
    # the accuracy reward flat at zero
    ("prefdiv.accuracy_reward_near_zero", "the format reward goes up but the accuracy reward stays close to 0"),
    ("prefdiv.accuracy_reward_near_zero", "格式奖励在涨，准确率奖励几乎为0"),
    # a rollout engine sharing the training GPUs
    ("system.rollout_engine_colocated", "GRPOConfig(use_vllm=True, vllm_mode='colocate', vllm_gpu_memory_utilization=0.9)"),
    ("system.rollout_engine_colocated", "actor_rollout_ref.rollout.gpu_memory_utilization=0.7"),
    ("system.rollout_wake_oom", "cuda error: out of memory at /workspace/csrc/cumem_allocator.cpp:62"),
    # accelerate's refusal on consumer cards without P2P
    ("system.geforce40_multi_gpu", "NotImplementedError: Using RTX 4000 series doesn't support faster communication broadband via P2P or IB. "
     'Please set `NCCL_P2P_DISABLE="1"` and `NCCL_IB_DISABLE="1" or use `accelerate launch` which will do this automatically.'),
]


@pytest.mark.parametrize("fact, text", FACT_CASES)
def test_the_words_set_the_fact(shipped_kb, fact, text):
    assert extract(shipped_kb, text).facts[fact].value is True


NEAR_MISSES = [
    # a head that is missing, not one too many; another key
    ("export.lm_head_rejected_on_load",
     "Some weights of LlamaForCausalLM were not initialized from the model checkpoint and are newly initialized: ['lm_head.weight']"),
    ("export.lm_head_rejected_on_load", "KeyError: 'model.embed_tokens.weight'"),
    # other exit codes
    ("system.killed_signal9", "the launcher exits with return code = -11"),
    ("system.killed_signal9", "Process finished with exit code 1"),
    # a reward model that is fine
    ("prefdiv.reward_model_weak", "the reward model is well trained, eval accuracy 0.93"),
    # an accuracy reward that left zero
    ("prefdiv.accuracy_reward_near_zero", "the accuracy reward rose from nearly zero to 0.6 within 200 steps"),
    # a GPU memory setting of a plain inference server
    ("system.rollout_engine_colocated", "vllm serve Qwen/Qwen2.5-7B --gpu-memory-utilization 0.9"),
]


@pytest.mark.parametrize("fact, text", NEAR_MISSES)
def test_near_misses_set_nothing(shipped_kb, fact, text):
    assert fact not in extract(shipped_kb, text).facts


REPORTS = [
    ("Merged my LoRA into gemma-2b with merge_and_unload and saved it. transformers loads the folder fine, "
     "but vllm serve fails in load_weights with KeyError: 'lm_head.weight'", "save-export.extra-lm-head-weight"),
    ("全参微调 minicpm 之后用 sglang 部署，启动时报 KeyError: 'lm_head.weight'，用 transformers 推理是正常的",
     "save-export.extra-lm-head-weight"),
    ("PPO with my own reward model: the RM only gets 0.6 accuracy on the validation pairs, the PPO reward does not go up "
     "and TRL warns that the KL divergence is starting to become negative", "preference-divergence.reward-model-undertrained"),
    ("奖励模型没有训练好，验证集准确率只有0.6，接着PPO训练一直提示KL散度为负", "preference-divergence.reward-model-undertrained"),
    ("GSPO run on math: the format reward climbs every step but the accuracy reward stays close to 0",
     "preference-divergence.reward-never-fires"),
    ("CPU-only training runs for a few hours and then stops with ERROR: error code -9, no traceback",
     "system-failure.host-memory"),
    ("GRPO on Qwen2.5-7B with vLLM colocated on 8 A100s: torch.OutOfMemoryError CUDA out of memory in the third step, "
     "vllm_gpu_memory_utilization=0.9", "system-failure.rollout-engine-memory"),
    ("verl PPO 训练到 rollout 阶段报 cuda error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
     "system-failure.rollout-engine-memory"),
    ("4张4090跑多卡微调，python train.py 直接报 NotImplementedError: Using RTX 3090 or 4000 series doesn't support faster "
     "communication broadband via P2P or IB.", "system-failure.nccl-network"),
]


@pytest.mark.parametrize("report, cause", REPORTS)
def test_the_report_ranks_the_cause_in_the_top_3(report, cause):
    top = ranked(report)[:3]
    assert cause in top, top


def test_a_head_that_differs_after_saving_is_a_broken_tie_not_an_extra_head():
    """Without the engine's KeyError, a tied head that changed on save stays with the broken tie."""
    top = ranked("after save_pretrained and reload, lm_head differs from embed_tokens although tie_word_embeddings is true")
    assert top[0] != "save-export.extra-lm-head-weight", top[:3]
