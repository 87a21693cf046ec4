"""Causes added for the second corpus round: each is reached from a realistic user description
(English and Chinese) or from the script the user pasted, and a near miss does not reach it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from troubleshoot.cli import main
from troubleshoot.loaders import detect
from troubleshoot.probes import ProbeContext, run_all

SAMPLES = Path(__file__).parent / "setup_samples"


def _ask(text: str, *probes: Path) -> list[str]:
    return [c["id"] for c in _causes(text, *probes)]


def _causes(text: str, *probes: Path) -> list[dict]:
    args = ["ask", text, "--no-input", "--json", "--top", "50"]
    for probe in probes:
        args += ["--probe", str(probe)]
    result = CliRunner().invoke(main, args)
    return json.loads(result.stdout)["causes"]


def _probe(path: Path):
    return run_all(ProbeContext([detect(path)], static=True))


# (description, cause, best rank it must reach)
REACHED = [
    ("After LoRA fine-tuning with alpaca-lora's finetune.py, adapter_model.bin is only 443 bytes",
     "save-export.peft-state-dict-override", 1),
    ("lora训练保存的adapter_model.bin很小，只有443字节", "save-export.peft-state-dict-override", 1),
    ("I trained a QLoRA adapter on the 4-bit model and merged it into the original fp16 base model; the 4-bit "
     "model with the adapter works but the merged model is much worse", "save-export.qlora-merge-base-mismatch", 1),
    ("QLoRA训练后把lora合并到原始fp16模型，合并后效果变差", "save-export.qlora-merge-base-mismatch", 1),
    ("QLoRA fine-tuning with load_in_4bit and bnb_4bit_compute_dtype=torch.float16: loss becomes nan after the "
     "first batch, lowering the learning rate did not help", "nan-loss.kbit-fp16-compute", 1),
    ("用4bit量化加载Qwen2做lora训练，loss在第一个batch后变成nan，学习率调很小也一样", "nan-loss.kbit-fp16-compute", 3),
    ("CUDA out of memory even though I set gradient_checkpointing=True in TrainingArguments; the log says "
     "ValueError: ChatGLMForConditionalGeneration does not support gradient checkpointing.",
     "system-failure.gc-not-implemented", 1),
    ("模型不支持梯度检查点，开了梯度检查点显存还是不够", "system-failure.gc-not-implemented", 1),
    ("After LoRA fine-tuning, when I load the model for inference it prints trainable params: 0 || all params: "
     "6243584000 || trainable%: 0.0000. Did the training fail?", "no-grad-flow.counted-at-inference", 1),
    ("LoRA训练完成后，加载模型推理时打印 trainable params: 0 || all params: 6243584000，是训练失败了吗",
     "no-grad-flow.counted-at-inference", 1),
    ("GRPO with a custom length reward: the reward goes up but completions get longer instead of shorter. My "
     "reward function is: return [abs(20 - len(c)) for c in completions]",
     "preference-divergence.reward-sign-inverted", 1),
    ("GRPO训练，自定义的奖励函数写反了，reward一直在上升但是回答越来越长", "preference-divergence.reward-sign-inverted", 1),
]

# near misses: the older cause stays first, the newer one far behind (words the two share may
# make it second: they reorder siblings, docs/knowledge-format.md "Words shared with a cause")
NOT_FIRST = [
    ("saved pytorch_model.bin is only a few KB after zero3 training", "save-export.zero3-empty-save",
     "save-export.peft-state-dict-override"),
    ("deepspeed zero3 with lora, the saved adapter_model.bin is only 107k", "save-export.zero3-empty-save",
     "save-export.peft-state-dict-override"),
    ("merge_and_unload on 4-bit model gives bad outputs", "save-export.lora-merge-4bit",
     "save-export.qlora-merge-base-mismatch"),
    ("CUDA out of memory during training with batch size 64 and seq len 4096", "system-failure.train-oom",
     "system-failure.gc-not-implemented"),
    ("trainable params: 0 || all params: 6738415616 || trainable%: 0.0 when I start LoRA training, the loss does "
     "not move", "no-grad-flow.lora-no-trainable", "no-grad-flow.counted-at-inference"),
    ("PPO reward keeps increasing but the answers get longer and worse when I read them",
     "preference-divergence.reward-hacking", "preference-divergence.reward-sign-inverted"),
]


@pytest.mark.parametrize(("text", "cause", "rank"), REACHED, ids=[c + "-" + t[:12] for t, c, _ in REACHED])
def test_description_reaches_the_cause(text, cause, rank):
    causes = _ask(text)
    assert cause in causes[:rank], causes[:5]


@pytest.mark.parametrize(("text", "first", "other"), NOT_FIRST, ids=[o for _, _, o in NOT_FIRST])
def test_near_miss_keeps_the_older_cause_first(text, first, other):
    causes = _causes(text)
    assert causes[0]["id"] == first, [c["id"] for c in causes[:5]]
    assert all(c["score"] < causes[0]["score"] / 2 for c in causes if c["id"] == other)


def test_nan_without_quantisation_does_not_rise():
    causes = _ask("loss becomes nan with bf16 full fine-tuning of a 7B model")
    assert "nan-loss.kbit-fp16-compute" not in causes[:3]


def test_state_dict_override_in_a_script_is_a_finding_and_a_fact():
    obs = _probe(SAMPLES / "lora_state_dict_override.py")
    finding = next(f for f in obs.findings if f.id == "setup.peft_state_dict_override")
    assert finding.severity == "warning" and finding.where.endswith("lora_state_dict_override.py:36")
    assert obs.facts["export.peft_state_dict_override"].value is True
    assert obs.facts["train.kbit_base"].value is True           # load_in_8bit=True
    assert obs.facts["model.dtype"].value == "fp16"


def test_pasted_script_ranks_the_override_first():
    causes = _ask("the saved adapter does nothing after training", SAMPLES / "lora_state_dict_override.py")
    assert causes[0] == "save-export.peft-state-dict-override", causes[:5]


@pytest.mark.parametrize("code", [
    "import torch\nfrom peft import get_peft_model_state_dict\n"
    "def save(model, path):\n    torch.save(get_peft_model_state_dict(model), path)\n",
    "model.load_state_dict = lambda sd: None\nprint(model.state_dict())\n",
])
def test_saving_with_get_peft_model_state_dict_is_not_the_override(tmp_path, code):
    script = tmp_path / "train.py"
    script.write_text(code)
    obs = _probe(script)
    assert "export.peft_state_dict_override" not in obs.facts
    assert not any(f.id == "setup.peft_state_dict_override" for f in obs.findings)


def test_distance_reward_is_a_finding_only_where_it_returns_one():
    obs = _probe(SAMPLES / "grpo_length_reward.py")
    found = [f for f in obs.findings if f.id == "setup.reward_distance"]
    assert [f.where.rsplit(":", 1)[1] for f in found] == ["9"]  # reward_len, not reward_format
    assert obs.facts["pref.reward_direction_inverted"].value is True
    causes = _ask("GRPO reward rises but the answers do not get closer to 20 characters",
                  SAMPLES / "grpo_length_reward.py")
    assert causes[0] == "preference-divergence.reward-sign-inverted", causes[:5]


@pytest.mark.parametrize("body", [
    "    return [-abs(20 - len(c)) for c in completions]",
    "    return [1 / (1 + abs(20 - len(c))) for c in completions]",
    "    return [float(len(c)) for c in completions]",
])
def test_signed_or_bounded_rewards_are_not_flagged(tmp_path, body):
    script = tmp_path / "grpo.py"
    script.write_text(f"def reward_len(completions, **kwargs):\n{body}\n\n\ndef distance(a, b):\n    return abs(a - b)\n")
    obs = _probe(script)
    assert not any(f.id == "setup.reward_distance" for f in obs.findings)
    assert "pref.reward_direction_inverted" not in obs.facts


def test_inference_count_dampens_the_frozen_causes():
    causes = _ask("为什么推理时显示trainable params: 0 || all params: 6243584000 || trainable%: 0.0000")
    assert causes[0] == "no-grad-flow.counted-at-inference", causes[:5]


def test_console_line_about_missing_checkpointing_ranks_it_above_the_plain_oom(tmp_path):
    console = tmp_path / "stderr.txt"
    console.write_text(
        "06/30/2023 10:26:44 - WARNING - llmtuner.extras.misc - Current model does not support gradient "
        "checkpointing.\nTraceback (most recent call last):\n  File \"src/train_bash.py\", line 14, in <module>\n"
        "    main()\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 428.00 MiB (GPU 0; 23.65 GiB "
        "total capacity; 21.69 GiB already allocated; 96.00 MiB free; 22.62 GiB reserved in total by PyTorch)\n")
    obs = _probe(console)
    finding = next(f for f in obs.findings if f.id == "signature.gc_not_supported")
    assert finding.where.endswith("stderr.txt:1")
    result = CliRunner().invoke(main, ["probe", str(console), "--json"])
    causes = [c["id"] for c in json.loads(result.stdout)["causes"]]
    assert causes[:2] == ["system-failure.gc-not-implemented", "system-failure.train-oom"], causes[:4]


@pytest.mark.parametrize("text", [
    "I already commented out the state_dict lines as in the other issue, adapter_model.bin is still 443 bytes",
    "已经按照另一个issue的方案注释了代码，adapter_model.bin还是只有443字节",
])
def test_a_removed_override_is_not_read_as_present(text):
    from troubleshoot.evidence import extract
    from troubleshoot.knowledge import load

    facts = extract(load(), text).facts
    assert facts["export.peft_state_dict_override"].value is False
    assert facts["export.adapter_file_tiny"].value is True
