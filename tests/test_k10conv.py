"""Knowledge added from the k10conv survey of public tracker threads (loss-plateau, no-grad-flow,
forgetting, mask-error, data-artifacts, preference-divergence): SFT labels written as a copy of
input_ids, a question whether torch.utils.checkpoint's warning can be ignored in a
vision-language model, and an RL run that keeps no KL term to the reference.

The words set their facts, near misses do not, and short reports written for this test in the
words such reports use rank the cause in the top 3 of `llmfix ask --no-input --json`."""

import pytest
from asking import causes, fact_value, ranked

FACT_CASES = [
    # labels copied from input_ids, so the prompt is supervised too
    ("mask.prompt_supervised", "why is the label just a clone of input_ids in your training code?"),
    ("mask.prompt_supervised", "the labels are a copy of the input_ids, nothing else"),
    ("mask.prompt_supervised", 'batch["labels"] = batch["input_ids"].clone()\n    return batch'),
    ("mask.prompt_supervised", "labels = input_ids.copy()\nreturn dict(input_ids=input_ids, labels=labels)"),
    ("mask.prompt_supervised", "我发现 labels 直接复制了 input_ids，没有区分问题和回答"),
    ("mask.prompt_supervised", "数据处理后 labels 和 input_ids 完全一样"),
    # asking whether a warning matters
    ("nograd.warning_only", "Is there any problem if I just ignore this warning message?"),
    ("nograd.warning_only", "does this warning affect the training at all?"),
    ("nograd.warning_only", "is the warning normal? everything else looks fine"),
    ("nograd.warning_only", "这个 warning 可以忽略吗"),
    ("nograd.warning_only", "训练时一直出现这个警告，会不会影响最终效果"),
    ("nograd.warning_only", "请问这是否会影响模型的训练？"),
    # a vision-language model
    ("nograd.vlm_model", "fine-tuning LLaVA-1.5-7B with the official finetune.sh"),
    ("nograd.vlm_model", "Qwen2.5-VL-7B-Instruct full fine-tune"),
    ("nograd.vlm_model", "InternVL2-8B lora"),
    ("nograd.vlm_model", "a multimodal large language model with a CLIP encoder"),
    ("nograd.vlm_model", "我在微调一个多模态大模型"),
    # no KL term in an RL run
    ("prefdiv.kl_anchor_off", "actor_rollout_ref.actor.use_kl_loss=False actor_rollout_ref.actor.kl_loss_coef=0"),
    ("prefdiv.kl_anchor_off", "use_kl_loss: false"),
    ("prefdiv.kl_anchor_off", "I turned off the KL penalty to speed things up"),
    ("prefdiv.kl_anchor_off", "the KL loss is disabled in this run"),
    ("prefdiv.kl_anchor_off", "GRPO 训练时关闭了 KL"),
    ("prefdiv.kl_anchor_off", "为了省显存去掉了KL loss"),
]


@pytest.mark.parametrize("fact, text", FACT_CASES)
def test_the_words_set_the_fact(shipped_kb, fact, text):
    assert fact_value(shipped_kb, text, fact) is True


NEAR_MISSES = [
    # a clone followed by the prompt masking; labels shifted for causal LM; prompt already masked
    ("mask.prompt_supervised", "labels = input_ids.clone()\nlabels[:, :prompt_len] = -100"),
    ("mask.prompt_supervised", "the labels are a copy of the input_ids shifted by one position"),
    ("mask.prompt_supervised", "labels = [-100] * len(prompt_ids) + answer_ids"),
    # a warning reported together with a run that does not learn; "ignore" of something else
    ("nograd.warning_only", "the warning appears and the loss does not decrease at all"),
    ("nograd.warning_only", "I cannot ignore the fact that lora_B stays zero"),
    ("nograd.warning_only", "is it normal that the loss is exactly 0?"),
    # text-only models and the vLLM engine
    ("nograd.vlm_model", "rollouts with vllm on Qwen2.5-7B-Instruct"),
    ("nograd.vlm_model", "Qwen2-7B-Instruct lora on a single A100"),
    # the KL term on, or only its estimator named
    ("prefdiv.kl_anchor_off", "actor_rollout_ref.actor.use_kl_loss=True"),
    ("prefdiv.kl_anchor_off", "the KL loss is not disabled, kl_loss_coef=0.001"),
    ("prefdiv.kl_anchor_off", "kl_loss_type=low_var_kl"),
]


@pytest.mark.parametrize("fact, text", NEAR_MISSES)
def test_near_misses_set_nothing(shipped_kb, fact, text):
    assert fact_value(shipped_kb, text, fact) is not True


REPORTS = [
    ("SFT of a small VLM with my own collator: the label is a clone of input_ids, so the question is trained along "
     "with the answer and the model starts repeating the question", "mask-error.prompt-not-masked"),
    ("SFT 数据处理里 labels 直接复制了 input_ids，训练后模型回答时会先把问题重复一遍，prompt 没有 mask",
     "mask-error.prompt-not-masked"),
    ("Fine-tuning Qwen2.5-VL-7B with gradient checkpointing prints UserWarning: None of the inputs have "
     "requires_grad=True. Gradients will be None at the first step. Can I safely ignore this warning? The loss goes "
     "down normally.", "no-grad-flow.frozen-branch-checkpoint-warning"),
    ("MiniCPM-V 微调时出现 None of the inputs have requires_grad=True. Gradients will be None 的警告，请问这个警告是否会影响训练？",
     "no-grad-flow.frozen-branch-checkpoint-warning"),
    ("verl GRPO on Qwen2.5-7B: reward rises for 150 steps then suddenly collapses and responses degenerate. The "
     "script has actor_rollout_ref.actor.use_kl_loss=False and algorithm.use_kl_in_reward=False.",
     "preference-divergence.beta-mistuned"),
    ("GRPO 训练中我关闭了 KL，reward 先上升后突然崩掉，输出变成乱码", "preference-divergence.beta-mistuned"),
]


@pytest.mark.parametrize("report, cause", REPORTS)
def test_the_report_ranks_the_cause_in_the_top_3(report, cause):
    top = ranked(report)[:3]
    assert cause in top, top


def test_a_lora_run_that_does_not_learn_keeps_the_checkpointing_fault_first():
    """The warning with a flat loss and zero adapters is the real fault, not the benign warning."""
    top = ranked("LoRA on Llama-3-8B with gradient_checkpointing=True: UserWarning: None of the inputs have "
                 "requires_grad=True. Gradients will be None, and the loss stays flat, lora_B is still all zeros.")
    assert top[0] == "no-grad-flow.gc-frozen-embeddings", top[:3]


def test_a_question_about_the_warning_does_not_confirm_the_checkpointing_fault():
    """Asking whether the warning matters is strong evidence against a run that learns nothing."""
    found = {c["id"]: c for c in causes("LoRA fine-tune prints UserWarning: None of the inputs have requires_grad=True. "
                                        "Gradients will be None. Is there any problem if I just ignore this warning?")}
    assert found["no-grad-flow.gc-frozen-embeddings"]["status"] != "confirmed"
