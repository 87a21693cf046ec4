"""Causes from the survey of public repetition / position-encoding / no-grad-flow threads: a base
model LoRA-tuned with a chat template whose end token it never trained, the tokenizer's
sequence-length warning (not a fault), and a PEFT / transformers release that leaves the adapter
untrainable; plus the wordings of duplicates, leakage and a zero learning rate they showed.

The texts are written for this test in the words such reports use; each new cause must rank in
the top 3 of `llmfix ask --no-input --json` without questions."""
from __future__ import annotations

import pytest
from asking import causes as _causes
from asking import fact_value as _fact
from asking import ranked as _ranked

from troubleshoot.knowledge import load


@pytest.fixture(scope="module")
def kb():
    return load()


def _posterior(text: str, cause: str) -> float:
    return next(c["posterior"] for c in _causes(text) if c["id"] == cause)


@pytest.mark.parametrize("text, expected", [
    ("model_name_or_path: Qwen/Qwen2.5-3B-Base", True),
    ("I fine-tuned mistral-7b base with LoRA", True),
    ("Mistral-7B-Instruct-v0.2 with LoRA", None),
    ("SFT on the base model with my own chat data", True),
    ("用 Llama-3-8B Base 做 lora 微调", True),
    ("sft训练Qwen2.5-7B-base模型", True),
    ("我用的是基座模型，不是chat模型", True),
    ("the model is a non-instruct checkpoint", True),
    ("Qwen2.5-7B-Instruct with LoRA", None),
    ("merge the adapter into the base weights", None),
])
def test_base_checkpoint_is_read_from_names_and_words(kb, text, expected):
    assert _fact(kb, text, "model.base_checkpoint") == expected


@pytest.mark.parametrize("text, expected", [
    ("template: qwen2", True),
    ("--template llama3 --finetuning_type lora", True),
    ("trained with the ChatML template", True),
    ("模板用的是qwen", True),
    ("each answer ends with <|im_end|>", True),
    ("template: default", None),
    ("I wrote my own prompt template", None),
])
def test_special_token_template_is_read_from_configs_and_words(kb, text, expected):
    assert _fact(kb, text, "train.template_special_tokens") == expected


@pytest.mark.parametrize("text", [
    "Mistral-7B base (v0.1) LoRA SFT with template: chatml. Every answer is correct but then it keeps "
    "writing new <|im_start|>user turns until max_new_tokens; full fine-tuning of the same data stops fine.",
    "Llama-3-8B-Base 用 lora 微调，template 选的 llama3，推理时回答完不会停止，一直生成到最大长度。",
])
def test_untrained_template_tokens_rank_first_three(text):
    assert "repetition.untrained-special-tokens" in _ranked(text)[:3]


def test_untrained_template_tokens_step_back_when_embeddings_are_trained():
    cause = "repetition.untrained-special-tokens"
    plain = _posterior("Qwen2.5-1.5B-Base LoRA with template: qwen never stops generating", cause)
    trained = _posterior("Qwen2.5-1.5B-Base LoRA with template: qwen never stops generating, "
                         "save_embedding_layers=True", cause)
    assert trained < plain / 2


@pytest.mark.parametrize("text, expected", [
    ("Token indices sequence length is longer than the specified maximum sequence length for this model "
     "(3311 > 2048). Running this sequence through the model will result in indexing errors", True),
    ("the tokenizer says the sequence is longer than the specified maximum sequence length", True),
    ("my sequence length is 4096, longer than the model's 2048 context", None),
])
def test_tokenizer_length_warning_is_read_from_the_line_and_words(kb, text, expected):
    assert _fact(kb, text, "posenc.tokenizer_length_warning") == expected


def test_tokenizer_length_warning_ranks_first_three_and_a_crash_pushes_it_down():
    warning = ("Token indices sequence length is longer than the specified maximum sequence length for this "
               "model (1877 > 1024). Running this sequence through the model will result in indexing errors")
    alone = _ranked(f"While tokenizing my dataset for gpt2 continued pretraining I see {warning}. "
                    "Should I worry about it?")
    assert "position-encoding.tokenizer-length-warning" in alone[:3]
    crashed = _ranked(f"{warning}\n    position_embeds = self.wpe(position_ids)\nIndexError: index out of range in self")
    assert crashed.index("position-encoding.absolute-positions-exceeded") < crashed.index(
        "position-encoding.tokenizer-length-warning")


@pytest.mark.parametrize("text, expected", [
    ('  File "modeling_bert.py", line 238, in forward\n    embeddings += position_embeddings\n'
     "RuntimeError: The size of tensor a (700) must match the size of tensor b (512) at non-singleton dimension 1",
     True),
    ("embeddings += position_embeddings", None),               # the code line alone: no failure
])
def test_bert_position_add_mismatch_sets_the_index_error(kb, text, expected):
    assert _fact(kb, text, "posenc.index_error") == expected
    assert _fact(kb, text, "posenc.learned_absolute") is True


@pytest.mark.parametrize("text, expected", [
    ("fine-tuning distilgpt2 on my chats", True),
    ("bert-base-chinese classifier", True),
    ("ModernBERT with 8k context", None),                      # RoPE, not a learned table
    ("Qwen2-7B long context", None),
])
def test_learned_absolute_families_are_read_from_names(kb, text, expected):
    assert _fact(kb, text, "posenc.learned_absolute") == expected


@pytest.mark.parametrize("text, expected", [
    ("feeding a long prompt results in a panic", True),
    ("longer inputs crash the server", True),
    ("长文本输入直接报错", True),
    ("a long training run crashed after 3 days", None),
])
def test_long_input_crash_is_read_from_words(kb, text, expected):
    assert _fact(kb, text, "posenc.index_error") == expected


def test_peft_version_regression_ranks_first_three():
    ranked = _ranked("After upgrading peft to 0.7.1, get_peft_model(model, config, adapter_name='sql') prints "
                     "trainable params: 0 and backward fails with element 0 of tensors does not require grad. "
                     "Going back to peft 0.6.2 fixes it.")
    assert "no-grad-flow.framework-regression" in ranked[:3]


@pytest.mark.parametrize("text, expected", [
    ("[TRAIN] Epoch 12 finished, loss=0.3120, lr=0.0 .", True),
    ("恢复训练以后学习率变成了0", True),
    ("the learning rate dropped to zero after resuming", True),
    ("lr=0.001 and the loss is flat", None),
    ("the learning rate dropped to 1e-5", None),
])
def test_zero_learning_rate_wordings(kb, text, expected):
    assert _fact(kb, text, "nograd.logged_lr_zero") == expected


@pytest.mark.parametrize("text, expected", [
    ("the generated jsonl has a lot of duplicate rows", True),
    ("one instruction showed 180 times in train.jsonl", True),
    ("训练数据里有大量重复样本", True),
    ("I removed duplicate rows before training and the loss is fine", None),  # what was done, not what was seen
    ("no duplicates in the data", None),
])
def test_reported_duplicates_are_read_from_words(kb, text, expected):
    assert _fact(kb, text, "artifacts.duplicates_seen") == expected


@pytest.mark.parametrize("text, expected", [
    ("6% of the test split (900 rows) also appears in the training set", True),
    ("there is train/test leakage because of duplicate rows", True),
    ("the test set is much smaller than the training set", None),
])
def test_eval_overlap_wordings(kb, text, expected):
    assert _fact(kb, text, "artifacts.eval_overlap") == expected


@pytest.mark.parametrize("text, expected", [
    ('  File "trl/trainer/dpo_trainer.py", line 1001, in concatenated_forward\nValueError: You are attempting to '
     "perform batched generation with padding_side='right' this may lead to unexpected behaviour for Flash "
     "Attention version of Mistral.", True),
    ("the error shows up when I run ORPO with flash attention", True),
    ("训练时报错 padding_side right", True),
    ("I run inference with flash attention on a padded batch", None),
])
def test_training_forward_is_read_from_tracebacks_and_words(kb, text, expected):
    assert _fact(kb, text, "mask.in_training_forward") == expected


def test_fa2_cache_right_padding_ranks_first_three_and_generation_stays_padding_side():
    error = ("ValueError: You are attempting to perform batched generation with padding_side='right' this may "
             "lead to unexpected behaviour for Flash Attention version of Qwen2. Make sure to call "
             "`tokenizer.padding_side = 'left'` before tokenizing the input.")
    training = _ranked(f"GRPOTrainer on Qwen2.5-1.5B with attn_implementation flash_attention_2 crashes in "
                       f"_get_per_token_logps:\n{error}")
    assert "mask-error.fa2-cache-right-padding" in training[:3]
    generating = _ranked(f"outputs = model.generate(**batch, max_new_tokens=64) on 8 prompts raises\n{error}")
    assert generating.index("mask-error.padding-side") < generating.index("mask-error.fa2-cache-right-padding")
