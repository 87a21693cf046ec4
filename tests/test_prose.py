"""Issue-template boilerplate, links, paths and identifiers do not decide how sure a match is.

The bodies are written for these tests in the style of the transformers, LLaMA-Factory and
DeepSpeed issue templates: a long, clear report must be matched, not called a guess."""
import pytest

from troubleshoot.matcher import SymptomMatcher
from troubleshoot.prose import language, prose, without_settings

TRANSFORMERS_STYLE = """\
### System Info

- `transformers` version: 4.44.2
- Platform: Linux-5.15.0-105-generic-x86_64-with-glibc2.35
- Python version: 3.10.14
- Huggingface_hub version: 0.24.6
- Safetensors version: 0.4.5
- Accelerate version: 0.34.2
- Accelerate config: not found
- PyTorch version (GPU?): 2.4.0+cu121 (True)
- Using distributed or parallel set-up in script?: yes, torchrun with 8 GPUs
- GPU type: NVIDIA A100-SXM4-80GB

### Who can help?

@muellerzr @SunMarc

### Information

- [ ] The official example scripts
- [x] My own modified scripts

### Tasks

- [ ] An officially supported task in the `examples` folder (such as GLUE/SQuAD, ...)
- [x] My own task or dataset (give details below)

### Reproduction

I fine-tune with `Trainer` and `fp16=True` using /home/me/runs/sft/train.py (commit 3f9a2c1d).
After about 200 steps the training loss becomes nan and stays nan, grad_norm is nan too.
See https://github.com/huggingface/transformers/issues/00000 for the script.

### Expected behavior

The loss should keep going down instead of turning into nan.
"""

LLAMAFACTORY_STYLE = """\
### Reminder

- [X] I have read the above rules and searched the existing issues.

### System Info

- `llamafactory` version: 0.9.1.dev0
- Platform: Linux-5.4.0-x86_64
- Python version: 3.11.9
- PyTorch version: 2.3.1+cu121 (GPU)
- Transformers version: 4.45.0
- Datasets version: 2.21.0
- DeepSpeed version: 0.15.1
- GPU type: NVIDIA GeForce RTX 4090

### Reproduction

用 llamafactory-cli train examples/train_lora/qwen2_lora_sft.yaml 做 SFT，训练几百步以后 loss 变成 nan，
grad_norm 也是 nan。

### Expected behavior

loss 正常下降

### Others

_No response_
"""


def test_template_headings_checkboxes_env_lines_and_links_are_removed():
    text = prose(TRANSFORMERS_STYLE)
    for gone in ("System Info", "Who can help", "official example scripts", "Platform", "Python version",
                 "GPU type", "https://", "/home/me", "3f9a2c1d", "4.44.2", "Expected behavior"):
        assert gone not in text, gone
    assert "training loss becomes nan" in text and "train" in text  # the file keeps its name
    words = language(TRANSFORMERS_STYLE)
    assert "becomes nan" in words and "grad_norm" not in words and "fp16=True" not in words and "@" not in words


def test_a_link_keeps_only_its_repository_name():
    text = prose("fixed in https://github.com/ggerganov/llama.cpp/pull/2276, see https://www.reddit.com/r/x/1")
    assert "llama cpp" in text and "pull" not in text and "reddit" not in text and "2276" not in text


def test_chinese_and_bilingual_template_headings():
    text = prose("### 复现\n\nloss 变成 nan\n\n### 预期行为\n\n正常\n\n### System Info / 系統信息\n\n- 平台：Linux\n")
    assert "复现" not in text and "预期行为" not in text and "系統信息" not in text and "平台" not in text
    assert "loss 变成 nan" in text


def test_a_loss_value_is_not_a_version_and_an_error_line_stays():
    text = prose("loss is 0.0 from step 1\nRuntimeError: CUDA error: device-side assert triggered")
    assert "0.0" in text and "device-side assert triggered" in text


def test_long_template_reports_are_matched_not_weak(shipped_kb):
    matcher = SymptomMatcher(shipped_kb)
    for body in (TRANSFORMERS_STYLE, LLAMAFACTORY_STYLE):
        matches = matcher.match_report(body)
        assert matches[0].id == "nan-loss", matches[:3]
        assert matcher.verdict(body, matches) == "match"


def test_a_report_of_unknown_words_is_still_weak(shipped_kb):
    """Cleaning the boilerplate must not make a vague report look sure."""
    matcher = SymptomMatcher(shipped_kb)
    for words in ("my colleagues say the dashboards look odd since yesterday, numbers disagree with spreadsheets",
                  "the chatbot answers politely but customers complain about the tone in emails"):
        query = f"### Reproduction\n\n{words}\n\n### Expected behavior\n\n- [x] I searched the issues"
        assert matcher.verdict(query, matcher.match_report(query)) == "weak", words


@pytest.mark.parametrize("text", ["fixed it by setting NCCL_P2P_LEVEL=NVL before torchrun",
                                  "'reward': 0.0, reward=0, loss=nan, rewards/accuracy_reward=0.0",
                                  "pl.Trainer(precision=16) gives nan, precision=32 is fine"])
def test_a_setting_in_a_sentence_code_or_a_reading_stays(text):
    assert without_settings(text) == text


def test_settings_drop_overrides_environment_and_continued_lines():
    got = without_settings("export NNODES=2\nswift rlhf --model x \\\n  num_generations=8 \\\n  beta=0.04\n"
                            "actor_rollout_ref.actor.use_kl_loss=True kept words")
    assert "NNODES" not in got and "num_generations" not in got and "beta=" not in got
    assert "use_kl_loss" not in got and "kept words" in got and "swift rlhf" in got
