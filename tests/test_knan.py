"""What the 2026-11-24 (fourth) survey of nan-loss / fp16-overflow / zero-loss reports taught: a loss
that trained first and fell to 0 later is a hidden NaN rather than masked labels, a DPO-family loss is
never 0 by design, and overflow lines users call occasional ("偶发", "intermittent") are the loss
scaler settling. Each text fact is read from wording written for this test (EN and ZH) and left
unset by near misses; each engine test asks about a short report written here."""
from __future__ import annotations

import pytest
from asking import fact_value, ranked

from troubleshoot.knowledge import load


@pytest.fixture(scope="module")
def kb():
    return load()


# --- zeroloss.dropped_mid_run -----------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "the loss became 0.0 after about 300 steps and never came back",
    "after 2 epochs the loss suddenly drops to 0",
    "loss went from 2.1 to 1.4 and then it dropped to 0.0",
    "Training loss suddenly went to zero halfway through epoch one",
    "训练了几百步后loss突然变为0",
    "loss先正常下降，然后变成0了",
    "跑到第二个epoch，loss一下子降为0",
])
def test_a_loss_that_falls_to_zero_later_is_read(kb, text):
    assert fact_value(kb, text, "zeroloss.dropped_mid_run") is True


@pytest.mark.parametrize("text", [
    "the loss is 0 from the very first step",
    "loss dropped to 0.5 after 300 steps",
    "训练一开始loss就是0",
    "loss下降到0.3后不再下降",
    "after 100 steps the eval accuracy is 0",
])
def test_zero_from_the_start_or_a_low_loss_is_not_a_late_drop(kb, text):
    assert fact_value(kb, text, "zeroloss.dropped_mid_run") is None


def test_a_late_drop_to_zero_puts_a_numeric_fault_above_masked_labels():
    causes = ranked("Full fine-tuning a 6B chat model in fp16: loss becomes 0.0 after 40 steps and then it "
                    "keeps going at 0.0")
    assert causes[0] in ("zero-loss.fp16-kernel-overflow", "zero-loss.nan-hidden-by-logger")
    assert "zero-loss.all-labels-masked" not in causes[:3]


# --- zero-loss.rl-loss-by-design is for policy-gradient losses only -----------------------------

def test_a_zero_dpo_loss_is_not_rl_by_design():
    causes = ranked("DPO training with DPOTrainer: the loss is 0.0 starting from the second step")
    assert causes[0] not in ("zero-loss.rl-loss-by-design", "zero-loss.all-labels-masked")
    assert "zero-loss.rl-loss-by-design" not in causes[:3]


def test_a_zero_grpo_loss_still_is():
    causes = ranked("GRPO training: loss is 0.0 for the first steps while the reward goes up")
    assert causes[0] == "zero-loss.rl-loss-by-design"


# --- fp16overflow.occasional_skips: the words for "occasional" ----------------------------------

@pytest.mark.parametrize("text", [
    "Gradient overflow. Skipping step appears intermittently during fp16 training",
    "we see OVERFLOW! Rank 0 Skipping step now and then, not every run",
    "训练时出现 OVERFLOW! Rank 0 Skipping step 的提示\n好像是偶发的，同样的数据不是每次都有",
    "deepspeed 的溢出提示时有时无",
])
def test_occasional_overflow_words_are_read(kb, text):
    assert fact_value(kb, text, "fp16overflow.occasional_skips") is True


@pytest.mark.parametrize("text", [
    "loss nan appears intermittently on some batches",
    "训练偶发 loss 变成 nan",
    "OVERFLOW! Rank 0 Skipping step on every step, the loss scale keeps falling",
])
def test_occasional_without_overflow_or_persistent_overflow_is_not(kb, text):
    assert fact_value(kb, text, "fp16overflow.occasional_skips") is None


def test_occasional_skips_on_a_bf16_model_rank_the_harmless_cause_top_three():
    causes = ranked("Qwen2 fine-tune with fp16: OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, "
                    "reducing to 32768 shows up intermittently; the loss keeps going down")
    assert "fp16-overflow.scale-search-skips" in causes[:3]


# --- moerouting.aux_loss_inert ------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "the load balancing loss function always returns a constant, whatever the gate logits",
    "the balancing expert's loss doesn't change at all while the LM loss goes down",
    "I printed it: the aux loss has no grad_fn, only the cross entropy does",
    "MoE的负载均衡loss没有梯度，路由器学不到均衡",
])
def test_an_inert_balancing_loss_is_read(kb, text):
    assert fact_value(kb, text, "moerouting.aux_loss_inert") is True


@pytest.mark.parametrize("text", [
    "the aux loss decreases steadily and the experts are balanced",
    "the router logits are detached before logging",
    "the loss function returns a tensor of shape [batch]",
    "负载均衡loss在下降",
])
def test_a_working_balancing_loss_is_not_inert(kb, text):
    assert fact_value(kb, text, "moerouting.aux_loss_inert") is None


def test_an_inert_balancing_loss_ranks_the_broken_aux_loss_first():
    causes = ranked("Fine-tuning an MoE model: the load balancing loss never helps, I printed it and the "
                    "balancing loss function always returns a constant")
    assert causes[0] == "moe-routing.aux-loss-broken"


# --- zeroloss.eager_fixes: a kernel switched off and the run is clean -----------------------------

@pytest.mark.parametrize("text", [
    "With the flash attention backend disabled the run is clean",
    "training stays finite with torch.backends.cuda.enable_cudnn_sdp(False)",
    "the same DPO run trains clean with eager",
])
def test_a_clean_run_without_the_fused_kernel_is_read(kb, text):
    assert fact_value(kb, text, "zeroloss.eager_fixes") is True


@pytest.mark.parametrize("text", [
    "I disabled flash attention and it still goes nan",
    "we call torch.backends.cuda.enable_cudnn_sdp(True) at start-up",
    "the run is clean with bf16",
])
def test_kernel_talk_without_a_clean_run_is_not(kb, text):
    assert fact_value(kb, text, "zeroloss.eager_fixes") is None


def test_a_nan_that_the_cudnn_backend_causes_ranks_the_attention_kernel_first():
    causes = ranked("DPO with sdpa attention in bf16: grad_norm turns NaN after 40 steps and never recovers. "
                    "Same script with the cuDNN SDPA backend disabled is clean.")
    assert causes[0] == "nan-loss.attention-kernel"


# --- nanloss.eager_finite: "the compiled loss is broken / comes back as NaN" ----------------------
@pytest.mark.parametrize("text", [
    "compile_loss function is broken, the loss comes back as NaN on every step",
    "since the torch.compile change the loss returns nan; the commit before it is fine",
    "with inductor the training results in a loss of nan",
])
def test_a_compiled_path_giving_nan_is_read(kb, text):
    assert fact_value(kb, text, "nanloss.eager_finite") is True


@pytest.mark.parametrize("text", [
    "torch.compile is broken on Windows, it crashes before the first step",
    "the compiled model returns a loss of 2.3",
    "compilation returns an error about triton",
])
def test_compile_trouble_without_nan_is_not(kb, text):
    assert fact_value(kb, text, "nanloss.eager_finite") is None


# --- zero-loss.rl-zero-advantage: loss AND grad norm 0 in GRPO, no reward spread inside a group ------

@pytest.mark.parametrize("text", [
    "{'loss': 0.0, 'grad_norm': 0.0, 'learning_rate': 2e-06, 'epoch': 0.1}",
    "the loss and grad_norm are both 0 on every step",
    "grad norm is always zero after the first step",
    "训练过程中loss和grad_norm都为0",
    "grad_norm一直是0，学习率正常",
])
def test_a_grad_norm_of_exactly_zero_is_read(kb, text):
    assert fact_value(kb, text, "zeroloss.grad_norm_zero") is True


@pytest.mark.parametrize("text", [
    "{'loss': 0.0, 'grad_norm': 0.0823, 'learning_rate': 2e-06}",
    "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 2e-06}",
    "max_grad_norm 0 disables clipping in my config",
    "grad_norm不为0，但是loss为0",
    "the grad norm is 0.5 and stable",
])
def test_a_small_nan_or_nonzero_grad_norm_is_not(kb, text):
    assert fact_value(kb, text, "zeroloss.grad_norm_zero") is None


@pytest.mark.parametrize("text", [
    "{'reward': 1.0, 'reward_std': 0.0, 'frac_reward_zero_std': 1.0, 'kl': 0.0}",
    "'frac_reward_zero_std': 0.96875",
    "the reward std is always 0 even though each reward function varies",
    "all the completions of a prompt get the same reward",
    "GRPO 训练时 reward 的 std 始终为 0",
    "看了 log_completions，同一组的 reward 都一样",
])
def test_no_reward_spread_in_a_group_is_read(kb, text):
    assert fact_value(kb, text, "zeroloss.group_reward_std_zero") is True


@pytest.mark.parametrize("text", [
    "{'reward': 0.41, 'reward_std': 0.4397, 'frac_reward_zero_std': 0.0}",
    "the reward std is not 0, it moves between 0.2 and 0.5",
    "rewards/format_reward/std: 0.0 but reward_std: 0.31",
    "reward_std 为 0.35，看起来正常",
    "每组的 reward 都不一样",
])
def test_a_spread_of_rewards_is_not(kb, text):
    assert fact_value(kb, text, "zeroloss.group_reward_std_zero") is None


def test_zero_loss_and_grad_norm_in_grpo_rank_the_zero_advantage_first():
    causes = ranked("GRPO with TRL on a 1.5B model and a 0/1 math reward. Every log line looks like "
                    "{'loss': 0.0, 'grad_norm': 0.0, 'reward': 0.0, 'reward_std': 0.0, "
                    "'frac_reward_zero_std': 1.0} and the weights do not move.")
    assert causes[0] == "zero-loss.rl-zero-advantage"


def test_the_chinese_report_ranks_it_top_three():
    causes = ranked("用 swift rlhf 跑 grpo，自己写的奖励函数，loss 和 grad_norm 一直为 0，reward_std 也是 0")
    assert "zero-loss.rl-zero-advantage" in causes[:3]


def test_a_zero_grpo_loss_with_a_live_gradient_stays_by_design():
    causes = ranked("GRPO training: loss is 0.0 at the start, grad_norm around 0.3, reward slowly rising")
    assert causes[0] == "zero-loss.rl-loss-by-design"
