"""Causes from the second-wave survey of public data-artifacts / no-grad-flow / loss-plateau
threads: a chat template rendered to text and tokenised again (two BOS tokens), the checkpoint
warning of a frozen branch (not a fault), and a loss that has reached the data's floor (not a
fault); plus the wordings those reports used.

The texts are written for this test in the words such reports use; each new cause must rank in
the top 3 of `llmfix ask --no-input --json` without questions."""
from __future__ import annotations

import pytest
from asking import fact_value as _fact
from asking import ranked as _ranked

from troubleshoot.knowledge import load


@pytest.fixture(scope="module")
def kb():
    return load()


@pytest.mark.parametrize("text, expected", [
    ("every prompt now starts with two BOS tokens", True),
    ("Additional BOS token when using my eval script", True),
    ("I see a double bos in the input ids", True),
    ("input_ids: [128000, 128000, 128006, 882, 128007]", True),
    ("<|begin_of_text|><|begin_of_text|><|start_header_id|>user", True),
    ("the bos token is added twice by the tokenizer", True),
    ("数据处理后开头有两个 bos", True),
    ("bos token 重复了两次", True),
    ("llama_tokenize: Added a BOS token to the prompt as specified by the model but the prompt also "
     "starts with a BOS token. So now the final prompt starts with 2 BOS tokens.", True),
    # near misses: one BOS, a BOS id once, a setting that names the token
    ("input_ids: [128000, 128006, 882, 128007]", None),
    ("the tokenizer adds a bos token at the start", None),
    ("add_bos_token: true in tokenizer_config.json", None),
])
def test_double_bos_is_read_from_words_ids_and_the_llamacpp_warning(kb, text, expected):
    assert _fact(kb, text, "data.tokens.double_bos") == expected


@pytest.mark.parametrize("text, expected", [
    ("prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)", True),
    ("ids = tokenizer.apply_chat_template(messages, tokenize=True)", None),
])
def test_template_rendered_as_text_is_read_from_code(kb, text, expected):
    assert _fact(kb, text, "data.template_rendered_as_text") == expected


@pytest.mark.parametrize("text", [
    "Our SFT data pipeline calls apply_chat_template(msgs, tokenize=False) and then tokenizer(text) "
    "for Llama-3-8B-Instruct; the decoded samples begin with <|begin_of_text|><|begin_of_text|>.",
    "用 Qwen 的 DeepSeek-R1-Distill 做评测，先 apply_chat_template 成字符串再编码，结果每条输入开头有两个 bos。",
])
def test_double_bos_ranks_in_top_three(text):
    assert "data-artifacts.double-bos" in _ranked(text)[:3]


@pytest.mark.parametrize("text, expected", [
    ("--freeze_vision_tower True --freeze_llm False", True),
    ("the vision tower is frozen and only the projector trains", True),
    ("I froze the ViT and the Q-Former", True),
    ("冻结了 ViT，只训练线性层", True),
    ("vision encoder 冻结，LLM 全参训练", True),
    # near misses: a frozen embedding layer, unfreezing the tower
    ("the embeddings are frozen under LoRA", None),
    ("--freeze_vision_tower False", False),
])
def test_frozen_branch_is_read_from_flags_and_words(kb, text, expected):
    assert _fact(kb, text, "nograd.frozen_branch") == expected


@pytest.mark.parametrize("text", [
    "Fine-tuning LLaVA with --freeze_vision_tower True and gradient checkpointing: the log keeps printing "
    "UserWarning: None of the inputs have requires_grad=True. Gradients will be None. The loss goes down, "
    "is the training still valid?",
    "多模态模型冻结了视觉编码器，开启梯度检查点后一直报 None of the inputs have requires_grad=True. "
    "Gradients will be None，但是 loss 正常下降，这个警告有影响吗？",
])
def test_frozen_branch_warning_ranks_in_top_three(text):
    assert "no-grad-flow.frozen-branch-checkpoint-warning" in _ranked(text)[:3]


def test_lora_checkpoint_warning_without_frozen_branch_still_points_at_gc_inputs():
    text = ("LoRA on Llama-2-7b with gradient_checkpointing=True: None of the inputs have requires_grad=True. "
            "Gradients will be None, and lora_B stays all zeros after 500 steps.")
    assert _ranked(text)[0] == "no-grad-flow.gc-frozen-embeddings"


@pytest.mark.parametrize("text, expected", [
    ("My SFT loss settles at 0.9 after 2 epochs, is this normal?", True),
    ("What final loss should I expect for LoRA SFT on chat data?", True),
    ("how low should the training loss go", True),
    ("SFT的loss最终大概降到多少比较合适", True),
    ("请问pt阶段的loss如图正常吗", True),
    ("最低的loss是多少", True),
    # near misses: a fault named, no question about the level
    ("the loss does not decrease at all", None),
    ("is this a bug in the trainer?", None),
    ("loss正常下降，但是输出重复", None),
])
def test_asks_if_normal_is_read_from_questions_about_the_loss_level(kb, text, expected):
    assert _fact(kb, text, "lossplateau.asks_if_normal") == expected


@pytest.mark.parametrize("text", [
    "Fine-tuning Qwen2.5-7B with LoRA on 20k chat samples: the loss drops from 2.1 to 1.0 in the first "
    "200 steps and then stays around 0.9 for the rest of the epoch. Is this loss normal or should it go lower?",
    "用 LLaMA-Factory 做 SFT，loss 开始降得很快，后面一直在 0.7 左右波动，请问最终 loss 一般能降到多少？",
])
def test_expected_loss_floor_ranks_in_top_three(text):
    assert "loss-plateau.expected-loss-floor" in _ranked(text)[:3]


def test_loss_at_ln_vocab_is_no_floor():
    text = "pretraining from scratch with a 32k vocab: the loss is stuck at 10.4 for 3000 steps, is this normal?"
    assert _ranked(text)[0] != "loss-plateau.expected-loss-floor"


@pytest.mark.parametrize("text, expected", [
    ("With ZeRO-3 the trainable params count is 0 on every rank.", True),
    ("param.numel() returns 0 for every weight when I set zero stage 3", True),
    ("zero3 下可训练参数为 0，zero2 正常", True),
    # near misses: a zero count without ZeRO-3, ZeRO-3 with a real count
    ("trainable params: 0 || all params: 6738415616", None),
    ("zero3 training, trainable params is 4194304", None),
])
def test_zero3_count_is_read_from_words(kb, text, expected):
    assert _fact(kb, text, "nograd.zero3_count_zero") == expected


@pytest.mark.parametrize("text", [
    "Training Llama-2-7b with the HF Trainer and a DeepSpeed zero3 config: with ZeRO-3 the number of trainable "
    "parameters is 0 in the log, with ZeRO-2 it shows 6.7B. The loss still goes down, is something broken?",
    "deepspeed zero3 训练时打印的可训练参数为 0，换成 zero2 就正常了，loss 也在下降，这正常吗？",
])
def test_zero3_count_ranks_in_top_three(text):
    assert "no-grad-flow.zero3-partitioned-count" in _ranked(text)[:3]
