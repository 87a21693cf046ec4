"""Knowledge added from the kopt survey of public tracker threads (loss-plateau, loss-spike,
preference-divergence, moe-routing, mask-error, forgetting): LoRA adapters that never reach the
routed experts of an MoE model, a rollout engine whose log-probs drift from the trainer's, a bug
in the preference trainer itself, SFT labels that supervise the prompt, GRPO truncation metrics
pasted as a table, and a loss that jumps down at the start of the second epoch.

The words set their facts, near misses do not, and short reports written for this test in the
words such reports use rank the cause in the top 3 of `llmfix ask --no-input --json`."""

import pytest
from asking import fact_value, ranked

FACT_CASES = [
    # LoRA on an MoE model that misses the experts
    ("moerouting.lora_misses_experts", "the adapters only cover attention: there are no LoRA adapters for the experts"),
    ("moerouting.lora_misses_experts", "with peft the routed experts remain frozen, only q_proj and v_proj get lora"),
    ("moerouting.lora_misses_experts", "Unsloth does not train the MoE layer of my model, the adapter has attention weights only"),
    ("moerouting.lora_misses_experts", "my config only fine-tunes adapters for the attention modules"),
    ("moerouting.lora_misses_experts", "Qwen3-30B-A3B lora 微调后发现专家没有被训练"),
    ("moerouting.lora_misses_experts", "the saved adapter_model.safetensors has no expert weights at all"),
    ("moerouting.fused_expert_params", "the experts are stored in one fused nn.Parameter of shape [num_experts, 2*inter, hidden]"),
    ("moerouting.fused_expert_params", "LoraConfig(target_modules=['q_proj'], target_parameters=['mlp.experts.gate_up_proj'])"),
    # rollout engine vs trainer log-probs
    ("prefdiv.rollout_logprob_mismatch", "during GRPO the vllm_vs_local_logprob_diff_mean keeps growing"),
    ("prefdiv.rollout_logprob_mismatch", "token_mult_prob_error is 1.3 after 300 steps"),
    ("prefdiv.rollout_logprob_mismatch", "the vLLM rollout logprobs differ a lot from the FSDP actor's logprobs on the same tokens"),
    ("prefdiv.rollout_logprob_mismatch", "I suspect a training-inference mismatch in my PPO run"),
    ("prefdiv.rollout_logprob_mismatch", "GRPO 训练中 vllm 的 logprob 和训练端对不上"),
    # the prompt supervised in SFT
    ("mask.prompt_supervised", "the instruction is not masked with -100 during SFT"),
    ("mask.prompt_supervised", "input_ids and labels are the same, so the loss includes the prompt"),
    ("mask.prompt_supervised", "my SFT loss is computed on the prompt tokens too"),
    ("mask.prompt_supervised", "sft 的时候 prompt 部分没有被 mask，loss 也算了问题部分"),
    # GRPO truncation metrics as a markdown table
    ("prefdiv.completions_truncated", "| `completions/clipped_ratio` | `1` | 39 / 40 |"),
    ("prefdiv.completions_truncated", "min_length = max_length = 256 on every logged step"),
    # a loss step at the start of an epoch
    ("lossspike.epoch_boundary_drop", "the train loss jumps down at the beginning of the second epoch"),
]


@pytest.mark.parametrize("fact, text", FACT_CASES)
def test_the_words_set_the_fact(shipped_kb, fact, text):
    assert fact_value(shipped_kb, text, fact) is True


NEAR_MISSES = [
    # experts that do get adapters; a dense model's frozen layers
    ("moerouting.lora_misses_experts", "LoRA is applied to attention and to every expert, the experts train fine"),
    ("moerouting.lora_misses_experts", "the first 10 layers remain frozen on purpose"),
    ("moerouting.fused_expert_params", "the MLP is a plain nn.Linear per expert"),
    # log-probs compared with something else, or agreeing
    ("prefdiv.rollout_logprob_mismatch", "the DPO logps of the chosen answers keep falling"),
    ("prefdiv.rollout_logprob_mismatch", "vLLM inference is slow compared to the training throughput"),
    # the prompt already masked
    ("mask.prompt_supervised", "the prompt tokens are set to -100 so only the answer is trained"),
    ("mask.prompt_supervised", "the padding is not masked in the labels"),
    # nothing clipped
    ("prefdiv.completions_truncated", "| `completions/clipped_ratio` | `0` | 40 / 40 |"),
    # a jump up at the epoch start, not down at the start of an epoch
    ("lossspike.epoch_boundary_drop", "the loss jumps after I resumed from checkpoint-1000"),
]


@pytest.mark.parametrize("fact, text", NEAR_MISSES)
def test_near_misses_set_nothing(shipped_kb, fact, text):
    assert fact_value(shipped_kb, text, fact) is not True


REPORTS = [
    ("LoRA fine-tune of Qwen3-30B-A3B with peft barely changes the model. Printing the trainable parameters shows only "
     "q_proj/k_proj/v_proj/o_proj: the routed experts remain frozen, the experts are one fused nn.Parameter",
     "moe-routing.lora-misses-experts"),
    ("gpt-oss-20b LoRA: my adapter_model.safetensors has no expert weights, target_modules gate_proj/up_proj/down_proj "
     "matched nothing in the MoE layer", "moe-routing.lora-misses-experts"),
    ("Qwen3 MoE 模型 lora 微调，训练完发现路由专家没有被训练，lora 只挂在了 attention 上", "moe-routing.lora-misses-experts"),
    ("GRPO with vLLM rollouts on Qwen2.5-7B: after 400 steps the reward collapses; vllm_vs_local_logprob_diff_mean "
     "grew steadily from 0.01 to 0.2 and the kl exploded", "preference-divergence.rollout-logprob-mismatch"),
    ("verl PPO 训练 200 步后 reward 下降，发现 vllm 的 logprob 和训练端对不上，训推不一致越来越大",
     "preference-divergence.rollout-logprob-mismatch"),
    ("DPO training goes wrong since upgrading trl: rewards/accuracies stay at 0.5 and rewards/chosen is 0 with the same "
     "data and config; downgrading trl to 0.11.4 fixed it", "preference-divergence.framework-regression"),
    ("SFT with my own collator: input_ids and labels are the same, so the loss includes the prompt and the "
     "instruction is not masked with -100; the model starts repeating the question", "mask-error.prompt-not-masked"),
    ("GRPO notebook: | `completions/clipped_ratio` | `1` |, min_length = max_length = 128 at every step, the accuracy "
     "reward is always 0", "preference-divergence.reward-never-fires"),
]


@pytest.mark.parametrize("report, cause", REPORTS)
def test_the_report_ranks_the_cause_in_the_top_3(report, cause):
    top = ranked(report)[:3]
    assert cause in top, top


def test_a_dense_lora_run_is_not_sent_to_the_moe_experts():
    """Frozen layers in a dense model are not an MoE adapter miss."""
    top = ranked("LoRA fine-tune of Llama-3-8B: the loss does not go down, the first layers remain frozen")[:3]
    assert "moe-routing.lora-misses-experts" not in top, top
