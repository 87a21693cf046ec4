"""Causes that a survey of public tracker threads found uncovered (knowledge round of 2026-11-24):
a GRPO reward that never matches the completions, a text loader that drops every line break, and
a framework version that mishandles RoPE scaling. Each is read from how reports describe it, and
each ranks in the top 3 of `llmfix ask --no-input --json` on a short report written for this test."""
from __future__ import annotations

import pytest
from asking import fact_value as fact
from asking import ranked as _ranked

from troubleshoot.knowledge import load


@pytest.fixture(scope="module")
def kb():
    return load()


# --- preference-divergence.reward-never-fires -------------------------------------------------

@pytest.mark.parametrize("text", [
    "my soft_format_reward_func is always 0 although the completions have the tags",
    "rewards/format_reward/mean stays at 0.0 for 300 steps",
    "The accuracy reward stays 0 the whole time while the format reward converges to 1",
    "strict format reward returns 0 for every completion",
    "GRPO训练format reward一直为0",
    "MathAccuracy奖励始终是0，Format奖励正常",
    "the reward is always 0 during GRPO",
])
def test_a_reward_that_never_fires_is_read(kb, text):
    assert fact(kb, text, "pref.reward_never_fires") is True


@pytest.mark.parametrize("text", [
    "the format reward rises from 0.2 to 0.9 within 100 steps",
    "accuracy reward is 0.45 at step 200",
    "GRPO loss is 0 at the first steps, is that normal?",
    "the format reward is not always 0, only on long completions",
    "reward_std is 0.3 and the kl stays small",
])
def test_other_reward_talk_is_not_a_dead_reward(kb, text):
    assert fact(kb, text, "pref.reward_never_fires") is None


@pytest.mark.parametrize("text", [
    "matches = [re.match(pattern, content) for content in completion_contents]",
    "I added re.DOTALL to the pattern",
    "the regex in my format reward looks for <think> and <answer>",
    "answer_parsed = parse(content) with math_verify",
    "reward函数里用正则匹配think标签",
])
def test_a_regex_or_parser_reward_is_read(kb, text):
    assert fact(kb, text, "pref.reward_regex") is True


def test_a_pattern_unrelated_to_rewards_is_not_read(kb):
    assert fact(kb, "the loss follows a periodic pattern every 500 steps", "pref.reward_regex") is None


# --- data-artifacts.newlines-stripped -----------------------------------------------------------

@pytest.mark.parametrize("text", [
    "after fine-tuning, the model does not generate newlines any more",
    "the generated text is all on a single line",
    "there are no line breaks in the outputs at all",
    "预训练后模型输出不换行",
    "训练数据里的换行符被忽略了",
])
def test_lost_line_breaks_are_read(kb, text):
    assert fact(kb, text, "data.newlines_lost") is True


@pytest.mark.parametrize("text", [
    "the model prints a literal \\n instead of a line break",
    "I split the dataset into lines and shuffled them",
    "every answer ends with two newlines",
])
def test_other_newline_talk_is_not_lost_line_breaks(kb, text):
    assert fact(kb, text, "data.newlines_lost") is None


@pytest.mark.parametrize("text", [
    'raw = load_dataset("text", data_files={"train": "corpus.txt"})',
    "python run_clm.py --train_file poems.txt --model_name_or_path gpt2",
    "用txt格式的数据做预训练",
])
def test_a_line_by_line_text_loader_is_read(kb, text):
    assert fact(kb, text, "data.plain_text_loader") is True


def test_a_requirements_file_is_not_training_text(kb):
    assert fact(kb, "pip install -r requirements.txt then run the training", "data.plain_text_loader") is None


# --- position-encoding.framework-regression ------------------------------------------------------

@pytest.mark.parametrize("text", [
    "ValueError: `rope_scaling` must be a dictionary with two fields, `type` and `factor`, got {'factor': 8.0, "
    "'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192, 'rope_type': 'llama3'}",
    "ValueError: `rope_scaling` must be a dictionary with with two fields, `type` and `factor`, got {...}",
    "ValueError: rope_scaling must contain keys {'type', 'factor'}",
])
def test_the_rope_scaling_refusal_is_a_signature(kb, text):
    assert fact(kb, text, "posenc.rope_scaling_unparsed") is True


def test_a_valid_rope_scaling_dict_is_not_the_refusal(kb):
    text = 'rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}'
    assert fact(kb, text, "posenc.rope_scaling_unparsed") is None


# --- the engine ranks each new cause -------------------------------------------------------------


@pytest.mark.parametrize("text,cause", [
    ("GRPOTrainer on Qwen2.5-0.5B-Instruct: rewards/format_reward/mean is 0.0 at every logging step although the "
     "completions I print do contain <think> and <answer>; the reward uses re.match(pattern, content)",
     "preference-divergence.reward-never-fires"),
    ("ms-swift GRPO 训练 Qwen2.5-VL，accuracy 奖励一直是0，reward函数里是正则匹配答案",
     "preference-divergence.reward-never-fires"),
    ("continued pretraining of a 1B model on my books.txt with run_clm.py: the model never generates line breaks, "
     "every paragraph comes out on one line", "data-artifacts.newlines-stripped"),
    ("用llama-factory在txt格式的语料上预训练qwen，训练完模型输出不换行", "data-artifacts.newlines-stripped"),
    ("vllm serve Meta-Llama-3.1-8B-Instruct fails at startup: ValueError: `rope_scaling` must be a dictionary with "
     "two fields, `type` and `factor`, got {'factor': 8.0, 'rope_type': 'llama3'}",
     "position-encoding.framework-regression"),
    ("after upgrading transformers our long-context eval broke: outputs are gibberish past 16k tokens, "
     "downgrading to 4.53 works again", "position-encoding.framework-regression"),
])
def test_new_cause_in_the_top_three(text, cause):
    assert cause in _ranked(text)[:3]


def test_a_reward_that_climbs_while_answers_worsen_stays_reward_hacking():
    """A reward that works and is exploited is not a reward that never fires."""
    ranked = _ranked("GRPO: the reward keeps climbing while the answers get longer and worse, the policy found a loophole")
    assert ranked[0] != "preference-divergence.reward-never-fires", ranked[:3]


def test_literal_backslash_n_stays_escape_characters():
    ranked = _ranked("after sft the model prints a literal \\n instead of line breaks in every answer")
    assert ranked[0] == "data-artifacts.escape-characters", ranked[:3]


def test_loops_that_an_older_vllm_does_not_make_are_a_regression():
    ranked = _ranked("since upgrading vllm to 0.11 our fine-tuned qwen repeats the same sentence until max_tokens; "
                     "rolling back to vllm 0.10.2 fixes it")
    assert "repetition.framework-regression" in ranked[:3], ranked[:5]


def test_loops_without_a_version_story_stay_with_the_eos_causes():
    ranked = _ranked("my fine-tuned llama repeats the same sentence and never stops")
    assert "repetition.framework-regression" not in ranked[:3], ranked[:5]


@pytest.mark.parametrize("text", [
    "we pass a custom 4D attention mask for packed sequences",
    "the 4d mask has shape (batch, 1, q, k)",
    "用4D attention mask做packing",
])
def test_a_custom_4d_mask_is_read(kb, text):
    assert fact(kb, text, "mask.custom_4d") is True


def test_a_2d_padding_mask_is_not_a_custom_4d_mask(kb):
    assert fact(kb, "attention_mask is the usual 2D padding mask from the tokenizer", "mask.custom_4d") is None


def test_a_mask_that_broke_with_a_release_is_a_regression():
    ranked = _ranked("packing with a custom 4D attention mask worked on transformers 4.40; after upgrading to 4.43 "
                     "the loss is much worse, and pinning 4.40 fixes it")
    assert "mask-error.framework-regression" in ranked[:3], ranked[:5]


@pytest.mark.parametrize("text", [
    "GRPOConfig(loss_type='grpo', beta=0.0)",
    "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
    "the loss is normalized by each response's own length",
])
def test_a_per_completion_length_normalised_loss_is_read(kb, text):
    assert fact(kb, text, "pref.seq_mean_loss") is True


@pytest.mark.parametrize("text", [
    "GRPOConfig(loss_type='dr_grpo')",
    "actor_rollout_ref.actor.loss_agg_mode=token-mean",
])
def test_length_unbiased_aggregations_are_not_read_as_biased(kb, text):
    assert fact(kb, text, "pref.seq_mean_loss") is None


def test_wrong_answers_growing_longer_point_at_the_length_bias():
    ranked = _ranked("verl GRPO with loss_agg_mode=seq-mean-token-mean on math: the wrong answers get longer and "
                     "longer while accuracy stays flat")
    assert "preference-divergence.length-normalization-bias" in ranked[:3], ranked[:5]


@pytest.mark.parametrize("text", [
    "the aux loss is added twice, once in the model forward and once in the trainer",
    "SFTTrainer double counts the aux loss for Qwen3-MoE",
    "the router aux_loss is multiplied by the world size",
    "MoE的aux loss加了两次",
])
def test_an_over_weighted_aux_loss_is_read(kb, text):
    assert fact(kb, text, "moe.aux_loss_overweighted") is True


def test_an_aux_loss_that_is_simply_logged_is_not_over_weighted(kb):
    assert fact(kb, "the aux loss is logged every step and decreases slowly", "moe.aux_loss_overweighted") is None


def test_a_doubled_aux_loss_is_ranked():
    ranked = _ranked("Qwen3-30B-A3B SFT with TRL: the aux loss is added twice, once by the model and once by SFTTrainer, "
                     "so the experts are balanced too hard")
    assert "moe-routing.aux-loss-double-counted" in ranked[:3], ranked[:5]


@pytest.mark.parametrize("text", [
    "the rotary embedding ignores the position_ids we pass for packed documents",
    "positions are never set by the dataloader",
    "position ids restart in the middle of a document",
    "packing训练时位置编码没有按文档重置",
])
def test_rope_that_ignores_real_positions_is_read(kb, text):
    assert fact(kb, text, "posenc.positions_ignored") is True


def test_left_padding_positions_are_not_the_packing_fault(kb):
    assert fact(kb, "position_ids do not start at 0 with left padding in batched generation", "posenc.positions_ignored") is None


def test_rope_positions_of_packed_documents_are_ranked():
    ranked = _ranked("sample packing in our own trainer: RoPE ignores the position ids, each packed document keeps "
                     "counting from where the previous one ended")
    assert "position-encoding.position-ids-ignored" in ranked[:3], ranked[:5]
