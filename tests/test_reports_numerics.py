"""How llmfix reads reports of NaN, Inf, zero and spiking losses and the init behind them: the cases a
table (tests/text_cases/) cannot say -- which of two causes a report puts first, what a whole pasted
traceback or config sets, and near misses that must push a cause down. The reports are written for
these tests in the words public reports use."""
from __future__ import annotations

import math

import pytest
from asking import answer, causes, entry, ranked

from troubleshoot.engine import applied_factors, score_cause, twins
from troubleshoot.evidence import extract
from troubleshoot.observations import Fact

VERL = """python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo \\
    actor_rollout_ref.actor.ppo_mini_batch_size={mini} \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro} \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=64 \\
    actor_rollout_ref.rollout.n={n} \\
    trainer.n_gpus_per_node={gpus} trainer.nnodes=1"""


# --- nan-loss ---------------------------------------------------------------------------------


def test_verl_batch_settings_are_read(shipped_kb):
    facts = extract(shipped_kb, VERL.format(mini=16, micro=32, n=5, gpus=4)).facts
    got = {name: facts[name].value for name in ("train.ppo_mini_batch_size", "train.ppo_micro_batch_size_per_gpu",
                                               "train.rollout_n", "train.gpus_per_node")}
    assert got == {"train.ppo_mini_batch_size": 16, "train.ppo_micro_batch_size_per_gpu": 32,
                   "train.rollout_n": 5, "train.gpus_per_node": 4}


def test_sound_verl_batch_sizes_push_the_zero_accumulation_down():
    text = ("GRPO with verl: grad_norm becomes nan after 300 steps.\n"
            + VERL.format(mini=256, micro=8, n=8, gpus=8))
    cause = entry(text, "nan-loss.zero-accumulation-steps")
    assert cause["posterior"] < cause["prior"] / 2   # x0.1 for the settings, partly undone by shared words


def test_a_nan_that_a_downgrade_fixes_stays_with_the_nan_regression():
    top = ranked("loss becomes nan after upgrading deepspeed to 0.14 on 8 GPUs; downgrading to deepspeed 0.13 fixes it")
    assert top[0] == "nan-loss.framework-regression", top[:3]
    assert "system-failure.framework-regression" not in top[:3]


def test_a_nan_that_the_cudnn_backend_causes_ranks_the_attention_kernel_first():
    causes = ranked("DPO with sdpa attention in bf16: grad_norm turns NaN after 40 steps and never recovers. "
                    "Same script with the cuDNN SDPA backend disabled is clean.")
    assert causes[0] == "nan-loss.attention-kernel"


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


# --- fp16-overflow ----------------------------------------------------------------------------


def test_occasional_skips_on_a_bf16_model_rank_the_harmless_cause_top_three():
    causes = ranked("Qwen2 fine-tune with fp16: OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, "
                    "reducing to 32768 shows up intermittently; the loss keeps going down")
    assert "fp16-overflow.scale-search-skips" in causes[:3]


def test_the_overflow_is_one_fault_with_its_fp16_view(shipped_kb):
    assert "fp16-overflow.activation-overflow" in twins(shipped_kb)["nan-loss.amp-fp16-overflow"]


# --- zero-loss --------------------------------------------------------------------------------


def test_a_late_drop_to_zero_puts_a_numeric_fault_above_masked_labels():
    causes = ranked("Full fine-tuning a 6B chat model in fp16: loss becomes 0.0 after 40 steps and then it "
                    "keeps going at 0.0")
    assert causes[0] in ("zero-loss.fp16-kernel-overflow", "zero-loss.nan-hidden-by-logger")
    assert "zero-loss.all-labels-masked" not in causes[:3]


def test_a_zero_dpo_loss_is_not_rl_by_design():
    causes = ranked("DPO training with DPOTrainer: the loss is 0.0 starting from the second step")
    assert causes[0] not in ("zero-loss.rl-loss-by-design", "zero-loss.all-labels-masked")
    assert "zero-loss.rl-loss-by-design" not in causes[:3]


def test_a_zero_grpo_loss_still_is():
    causes = ranked("GRPO training: loss is 0.0 for the first steps while the reward goes up")
    assert causes[0] == "zero-loss.rl-loss-by-design"


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


def _product(shipped_kb, cause_id: str, **values) -> float:
    """The product of the factors a cause's evidence applies to these facts (as the user's answers)."""
    cause = shipped_kb.causes[cause_id]
    facts = {name.replace("__", "."): Fact(name.replace("__", "."), value) for name, value in values.items()}
    _, lines, _ = score_cause(cause, facts)
    return math.prod(applied_factors(lines))


@pytest.mark.parametrize("cause, ratio", [
    ("nan-loss.fp16-on-bf16-model", 6), ("zero-loss.fp16-kernel-overflow", 6), ("fp16-overflow.bf16-weights-in-fp16", 6),
])
def test_fp16_on_a_bf16_release_counts_the_precision_once(shipped_kb, cause, ratio):
    """"fp16" is one observation, whether a config says it, the text, or the AMP switch beside it:
    a bf16 release run in fp16 is worth its ratio once (docs/calibration.md, "No double counting");
    it was x15 and x12 when the fp16 gate's other side and the bf16-release item both counted fp16."""
    fp16 = {"train__precision": "fp16", "model__pretrained_dtype": "bf16"}
    assert _product(shipped_kb, cause, **fp16) == pytest.approx(ratio)
    assert _product(shipped_kb, cause, **fp16, train__amp_autocast=True) == pytest.approx(ratio)


@pytest.mark.parametrize("cause", ["nan-loss.fp16-on-bf16-model", "nan-loss.overflow-step-skipped"])
def test_amp_stands_for_fp16_only_while_the_precision_is_not_given(shipped_kb, cause):
    alone = _product(shipped_kb, cause, train__amp_autocast=True)
    assert alone > 1
    for precision in ("fp16", "bf16"):
        assert _product(shipped_kb, cause, train__precision=precision, train__amp_autocast=True) == \
            pytest.approx(_product(shipped_kb, cause, train__precision=precision))


def test_a_mask_fill_read_under_fp16_counts_fp16_once(shipped_kb):
    """The setup probe reads an unsafe mask fill only in an fp16 run: the fill is worth x20, not x40."""
    assert _product(shipped_kb, "mask-error.unsafe-fill-value", mask__additive_fill_unsafe=True,
                    train__precision="fp16") == pytest.approx(20)


def test_zero_loss_from_fp16_on_a_bf16_model_is_one_fault_with_its_other_views(shipped_kb):
    group = twins(shipped_kb)["zero-loss.fp16-kernel-overflow"]
    assert {"fp16-overflow.bf16-weights-in-fp16", "nan-loss.fp16-on-bf16-model"} <= group


# --- loss-spike -------------------------------------------------------------------------------


@pytest.mark.parametrize("text, cause", [
    ("Full fine-tuning Qwen2-7B for 3 epochs with LLaMA-Factory: the training loss drops suddenly at the "
     "start of each epoch and the curve looks like stairs. Is my training broken?",
     "loss-spike.epoch-boundary-drop"),
    ("InternLM 全参 SFT 跑了 4 个 epoch，每个 epoch 开始 loss 都突然下降，曲线呈阶梯状，是不是有问题？",
     "loss-spike.epoch-boundary-drop"),
    ("QLoRA fine-tune of Llama-2-13B: since upgrading bitsandbytes to 0.43 the loss diverges after about 50 steps; "
     "downgrading to 0.42 makes it smooth again.",
     "loss-spike.framework-regression"),
    ("Training with Apex amp O1: during the first iterations it prints 'Gradient overflow.  Skipping step, loss "
     "scaler 0 reducing loss scale to 32768.0' a few times. Is this normal? The loss keeps going down.",
     "fp16-overflow.scale-search-skips"),
    ("deepspeed fp16 训练刚开始时出现 OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768，"
     "过几步后恢复正常，这个正常吗？",
     "fp16-overflow.scale-search-skips"),
    ("fp16 fine-tuning of my ViT gives NaN since I upgraded the model code to the new release; reverting to v1.2 "
     "trains fine in fp16, and bf16 is fine too.",
     "fp16-overflow.framework-regression"),
    ("GRPO with verl on Qwen2.5-0.5B: fine on one GPU, but on 4 GPUs grad_norm is nan from the first step.\n"
     + VERL.format(mini=16, micro=32, n=5, gpus=4),
     "nan-loss.zero-accumulation-steps"),
    ("Pretraining a 124M GPT with compile=True: the loss turns nan after 3k iterations; with --compile=False the same "
     "run is fine.", "nan-loss.compiled-kernels"),
    ("训练时开了 torch.compile，loss 几百步后变成 nan，去掉 compile 就正常了", "nan-loss.compiled-kernels"),
])
def test_the_report_ranks_its_cause_in_the_top_3(text, cause):
    assert cause in ranked(text)[:3]


# --- bad-init ---------------------------------------------------------------------------------


def test_a_full_finetune_from_scratch_does_not_blame_an_adapter():
    top = ranked("pretraining a 1B model from scratch, the initial loss is 40 with a 32000 vocabulary")
    assert top[0] == "bad-init.std-too-large", top[:5]
    assert "bad-init.adapter-not-identity" not in top[:3], top[:5]


@pytest.mark.parametrize("report", [
    "FP32模式下训练正常，开启混合精度后loss出现NaN",
    "works fine in fp32, but with AMP the loss becomes NaN after 2 epochs",
])
def test_fp32_named_as_the_comparison_does_not_contradict_an_amp_overflow(report):
    """'Fine in fp32, NaN under AMP' is the overflow's signature, not a run in fp32."""
    fp16 = next(s for s in answer(report)["symptoms"] if s["id"] == "fp16-overflow")
    assert fp16["observed"] is not False and fp16["weight"] > 0
