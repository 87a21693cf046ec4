"""How far a negation reaches in the user's words (troubleshoot/evidence/negation.py): a negator
negates what follows it in its own clause, never a match in the next clause ("vllm does not stop
because eos is ..."); a denial later in the clause ("... and there is none") negates what it
follows; and true negations ("not using fp16", "没有用fp16") keep setting nothing."""
from __future__ import annotations

import pytest

from troubleshoot.evidence import extract
from troubleshoot.knowledge import load

EOS_PAIR = "<|endoftext|> while the template ends with <|im_end|>"

# (text, fact, expected value; None = the fact stays unset)
CROSSES_A_CLAUSE = [
    (f"vllm does not stop because eos_token is {EOS_PAIR}", "model.eos_mismatch", True),
    (f"generation never ends since the eos_token is {EOS_PAIR}", "model.eos_mismatch", True),
    ("the model doesn't stop generating which is odd, eos_token is </s> but the chat template uses <|im_end|>",
     "model.eos_mismatch", True),
    (f"it won't stop talking as the eos token is {EOS_PAIR}", "model.eos_mismatch", True),
    ("模型不停止，因为eos是<|endoftext|>而模板用<|im_end|>结尾", "model.eos_mismatch", True),
    ("模型没停因为eos_token是<|endoftext|>，模板却以<|im_end|>结尾", "model.eos_mismatch", True),
    ("推理时没有停下来，原因是eos_token是</s>但模板以<|im_end|>结束", "model.eos_mismatch", True),
    ("it doesn't work since we train in fp16", "train.precision", "fp16"),
    ("it doesn't converge because I train with fp16", "train.precision", "fp16"),
    ("no idea what happened so I switched to bf16", "train.precision", "bf16"),
    ("I don't know why the model runs in fp16", "train.precision", "fp16"),
    ("not sure why, but the loss is nan with fp16", "logs.nan", True),
    ("not sure why, but the loss is nan with fp16", "train.precision", "fp16"),
    ("not sure why the loss is nan", "logs.nan", True),
    ("the eval did not finish when the loss is nan", "logs.nan", True),
    ("it does not converge as the lr is high and we use fp16", "train.precision", "fp16"),
    ("the loss did not drop although the model is in bf16", "train.precision", "bf16"),
    ("it never finished due to fp16 overflow", "train.precision", "fp16"),
    ("nothing changed if I enable gradient checkpointing", "train.gradient_checkpointing", True),
    ("I did not touch the config that turns on gradient checkpointing", "train.gradient_checkpointing", True),
    ("no error at first; loss is nan after 200 steps", "logs.nan", True),
    ("不收敛，所以我改用了fp16", "train.precision", "fp16"),
    ("不知道为什么，但是用fp16时loss为nan", "logs.nan", True),
    ("没报错，但loss为nan", "logs.nan", True),
    ("没有变化，不过我们用的是bf16", "train.precision", "bf16"),
    ("效果没有提升，由于显存不够用了fp16", "train.precision", "fp16"),
    ("没收敛因为用了fp16", "train.precision", "fp16"),
]

STILL_NEGATED = [
    ("I'm not using fp16", "train.precision", None),
    ("we are not training in fp16 because it overflowed before", "train.precision", None),
    ("没有用fp16", "train.precision", None),
    ("没用bf16，因为V100不支持", "train.precision", None),
    ("I did not set pad_token = eos_token", "model.pad_is_eos", None),
    ("no NaN loss so far", "logs.nan", None),
    ("the loss is not nan", "logs.nan", None),
    ("没有出现loss为nan的情况", "logs.nan", None),
    ("not fp16 but bf16", "train.precision", "bf16"),
    ("用的是bf16而不是fp16", "train.precision", "bf16"),
    ("I did not set the dtype as fp16", "train.precision", None),
    ("we do not enable gradient checkpointing since memory is fine", "train.gradient_checkpointing", False),
    ("training without gradient clipping because the loss was stable", "train.grad_clip", 0),
    ("没有梯度裁剪，因为loss一直很稳", "train.grad_clip", 0),
    ("I don't think the pad token is the same as the eos token", "model.pad_is_eos", None),
    ("we switched from fp16 to bf16 because of overflow", "train.precision", "bf16"),
    ("not so sure fp16 is the problem", "train.precision", None),
    ("never used fp16 or bf16", "train.precision", None),
]

# A denial after the match, in the match's own clause ("... and there is none", "... is not the
# issue", "... 已排除"), sets nothing; a denial of something else, or past a comma or a "but", does not.
DENIED_AFTER = [
    ("I checked for NaN values in the dataset and there are none", "data.has_nonfinite", None),
    ("we looked for nan in the data and found none", "data.has_nonfinite", None),
    ("labels are all -100 is not the issue, I checked", "data.labels.no_target", None),
    ("the idea that the labels are all -100 was ruled out", "data.labels.no_target", None),
    ("数据中有nan已排除", "data.has_nonfinite", None),
    ("the loss is nan and nothing helps", "logs.nan", True),
    ("the loss is nan and it is not clear why", "logs.nan", True),
    ("the loss is nan, the data looks fine", "logs.nan", True),
    ("the loss is nan but the data looks fine", "logs.nan", True),
    ("the dataset has NaN values and I do not know why", "data.has_nonfinite", True),
    ("labels are all -100 and it looked fine before the upgrade", "data.labels.no_target", True),
    ("loss为nan，不是数据的问题", "logs.nan", True),
]


@pytest.fixture(scope="module")
def kb():
    return load()


# a negated participle, then when it happened: the negation is about the participle
WHEN_IT_HAPPENED = [
    ("the optimizer state dict was not correctly loaded after resume", "lossspike.after_resume", True),
    ("the lr scheduler was not restored after resuming, the loss jumps", "lossspike.after_resume", True),
    ("the spike does not happen after resuming", "lossspike.after_resume", None),
    ("it did not spike after resuming", "lossspike.after_resume", None),
]


@pytest.mark.parametrize("text,fact,expected", CROSSES_A_CLAUSE + STILL_NEGATED + DENIED_AFTER + WHEN_IT_HAPPENED)
def test_negation_stays_in_its_clause(kb, text, fact, expected):
    hit = extract(kb, text).facts.get(fact)
    assert (hit.value if hit else None) == expected
