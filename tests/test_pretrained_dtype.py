"""The dtype a model was released in (model.pretrained_dtype) is kept apart from the dtype a
script loads it in (model.dtype): a bf16 checkpoint loaded with torch_dtype=torch.float16 is the
fp16-on-bf16 fault, not a model that "is fp16"."""
from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from troubleshoot.cli import main
from troubleshoot.evidence import extract

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

SCRIPT = """\
import torch
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("{ckpt}", torch_dtype=torch.float16)
args = TrainingArguments(output_dir="out", learning_rate=2e-5, per_device_train_batch_size=4)
trainer = Trainer(model=model, args=args, train_dataset=train_dataset)
trainer.train()
"""
FP16_ON_BF16 = "nan-loss.fp16-on-bf16-model"


def _checkpoint(tmp_path, dtype):
    """A tiny Llama saved in ``dtype``, its output projections depth-scaled (1/sqrt(2*layers), as
    Megatron and BLOOM initialise them) so that the weights probe has no init fault to report."""
    from modelfactory import LAYERS, save_hf, tiny_llama

    model = tiny_llama(dtype)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                weight.mul_((2 * LAYERS) ** -0.5)
    return save_hf(model, tmp_path / "ckpt")


def _ask(text: str, *paths) -> dict:
    args = ["ask", text, "--no-input", "--json"] + [a for p in paths for a in ("--probe", str(p))]
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _evidence(cause: dict) -> dict[str, dict]:
    return {e["fact"]: e for e in cause["evidence"]}


def _run(tmp_path, dtype) -> dict:
    ckpt = _checkpoint(tmp_path, dtype)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(ckpt=ckpt))
    return _ask("the training loss becomes nan after a few steps", ckpt, script)


def test_a_bf16_checkpoint_loaded_in_fp16_ranks_the_fault_first(tmp_path):
    diag = _run(tmp_path, torch.bfloat16)
    first = diag["causes"][0]
    assert first["id"] == FP16_ON_BF16, [c["id"] for c in diag["causes"]]
    used = _evidence(first)
    assert used["model.pretrained_dtype"]["value"] == "bf16"
    assert used["model.pretrained_dtype"]["from"] == "probe:config"
    assert used["train.precision"]["value"] == "fp16"
    assert used["train.precision"]["from"] == "probe:setup"
    assert "torch_dtype=torch.float16" in used["train.precision"]["span"]


def test_a_fp16_released_checkpoint_run_in_fp16_is_not_that_fault(tmp_path):
    diag = _run(tmp_path, torch.float16)
    assert diag["causes"][0]["id"] != FP16_ON_BF16
    cause = next(c for c in diag["causes"] if c["id"] == FP16_ON_BF16)
    released = [e for e in cause["evidence"] if e["fact"] == "model.pretrained_dtype"]
    assert released and all(e["value"] == "fp16" for e in released)
    assert math.prod(e["factor"] for e in released) == pytest.approx(0.3)  # the fp16 release, counted once
    assert cause["score"] < 0.25


def test_the_config_probe_publishes_the_release_dtype_not_the_load_dtype(tmp_path):
    from troubleshoot.loaders import detect
    from troubleshoot.probes import ProbeContext, run_all

    ckpt = _checkpoint(tmp_path, torch.bfloat16)
    obs = run_all(ProbeContext([detect(ckpt)], static=True))
    assert obs.facts["model.pretrained_dtype"].value == "bf16"
    assert "model.dtype" not in obs.facts and "train.precision" not in obs.facts


@pytest.mark.parametrize("text", [
    "Fine-tuning Qwen2-7B with TrainingArguments(fp16=True): the loss becomes nan after 200 steps",
    "Qwen2-7B: model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float16), "
    "then the loss becomes nan after 200 steps",
])
def test_a_bf16_family_named_in_text_and_run_in_fp16_ranks_the_fault_first(text):
    diag = _ask(text)
    first = diag["causes"][0]
    assert first["id"] in (FP16_ON_BF16, "fp16-overflow.bf16-weights-in-fp16"), [c["id"] for c in diag["causes"]]
    used = _evidence(first)
    assert (used["model.pretrained_dtype"]["value"], used["model.pretrained_dtype"]["span"]) == ("bf16", "Qwen2")
    assert used["train.precision"]["value"] == "fp16"


@pytest.mark.parametrize("text,loaded,released", [
    ("from_pretrained('Qwen/Qwen2-7B', torch_dtype=torch.float16)", "fp16", "bf16"),
    ("trl sft --model_name_or_path Qwen/Qwen2-0.5B --torch_dtype float16", "fp16", "bf16"),
    ('{"_name_or_path": "meta-llama/Llama-2-7b-hf", "torch_dtype": "float16"}', "fp16", "fp16"),
    ('config.json: {"architectures": ["GPT2LMHeadModel"], "dtype": "float32"}', None, "fp32"),
])
def test_text_keeps_the_load_dtype_apart_from_the_release_dtype(shipped_kb, text, loaded, released):
    facts = {name: hit.value for name, hit in extract(shipped_kb, text).facts.items()}
    assert (facts.get("model.dtype"), facts.get("model.pretrained_dtype")) == (loaded, released)


LLAMAFACTORY = """\
### model
model_name_or_path: {model}

### method
stage: sft
do_train: true
finetuning_type: full

### dataset
dataset: alpaca_en_demo
template: qwen
cutoff_len: 1024

### train
per_device_train_batch_size: 2
gradient_accumulation_steps: 8
learning_rate: 1.0e-5
num_train_epochs: 3.0
lr_scheduler_type: cosine
warmup_ratio: 0.1
fp16: true
"""


def test_a_trainer_config_naming_a_bf16_model_in_fp16_ranks_the_fault_first(tmp_path):
    config = tmp_path / "qwen2_full_sft.yaml"
    config.write_text(LLAMAFACTORY.format(model="Qwen/Qwen2-7B-Instruct"))
    diag = _ask("training loss is nan after a few hundred steps", config)
    first = diag["causes"][0]
    assert first["id"] == FP16_ON_BF16, [c["id"] for c in diag["causes"]]
    used = _evidence(first)
    assert used["model.pretrained_dtype"]["value"] == "bf16"
    assert used["model.pretrained_dtype"]["span"] == "model_name_or_path: Qwen/Qwen2-7B-Instruct"
    assert (used["train.precision"]["value"], used["train.precision"]["span"]) == ("fp16", "fp16: true")


@pytest.mark.parametrize("source,released", [
    ('model = AutoModelForCausalLM.from_pretrained("meta-llama/Meta-Llama-3-8B", torch_dtype=torch.float16)', "bf16"),
    ('model = AutoModelForCausalLM.from_pretrained("openai-community/gpt2", torch_dtype=torch.float16)', None),
    ("model = AutoModelForCausalLM.from_pretrained(args.model_path, torch_dtype=torch.float16)", None),
])
def test_the_model_a_script_loads_names_its_release_dtype(tmp_path, source, released):
    from troubleshoot.loaders import detect
    from troubleshoot.probes import ProbeContext, run_all

    script = tmp_path / "train.py"
    script.write_text(f"import torch\nfrom transformers import AutoModelForCausalLM\n\n{source}\n")
    facts = run_all(ProbeContext([detect(script)], static=True)).facts
    assert facts["model.dtype"].value == "fp16"
    assert (facts["model.pretrained_dtype"].value if "model.pretrained_dtype" in facts else None) == released
