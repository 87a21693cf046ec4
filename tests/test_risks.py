"""Settings known to lead to a fault are flagged by `llmfix probe` before the fault shows (a
cause's `risk`, probes/risks.py): a warning naming the cause, exit 0 unless --fail-on warning,
no symptom; and the same settings written the safe way, or left unread, are no risk."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from troubleshoot.cli import main

LLAMA_FACTORY = """### model
model_name_or_path: Qwen/Qwen2.5-7B-Instruct

### method
stage: sft
do_train: true
finetuning_type: lora
lora_target: all

### dataset
dataset: alpaca_en_demo
template: qwen
cutoff_len: 2048

### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
lr_scheduler_type: cosine
warmup_ratio: 0.1
{precision}: true
"""

ZERO3 = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
         "bf16": {"enabled": "auto"},
         "zero_optimization": {"stage": 3, "overlap_comm": True, "contiguous_gradients": True,
                               "stage3_max_live_parameters": 1e9}}

ACCELERATE = """compute_environment: LOCAL_MACHINE
deepspeed_config:
  offload_optimizer_device: none
  offload_param_device: none
  zero3_init_flag: true
  zero3_save_16bit_model: {save}
  zero_stage: 3
distributed_type: DEEPSPEED
mixed_precision: bf16
num_machines: 1
num_processes: 8
"""


def probe(path: Path, *extra: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["probe", "--json", *extra, str(path)])
    return result.exit_code, json.loads(result.output)


def risks(answer: dict) -> dict[str, dict]:
    return {f["value"]["cause"]: f for f in answer["findings"] if f["id"] == "setup.risk"}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_fp16_on_a_model_released_in_bf16_is_a_warning_naming_the_cause(tmp_path):
    config = write(tmp_path, "qwen_lora_sft.yaml", LLAMA_FACTORY.format(precision="fp16"))
    code, answer = probe(config)
    found = risks(answer)
    assert set(found) == {"nan-loss.fp16-on-bf16-model"}
    risk = found["nan-loss.fp16-on-bf16-model"]
    assert risk["severity"] == "warning" and risk["where"] == str(config)
    assert risk["value"]["settings"] == {"model.pretrained_dtype": "bf16", "train.precision": "fp16"}
    assert "fp16: true" in risk["message"] and "65504" in risk["message"]
    assert code == 0 and answer["symptoms"] == [] and answer["causes"] == []  # a risk is no diagnosis
    assert probe(config, "--fail-on", "warning")[0] == 1


def test_the_same_config_in_bf16_is_quiet(tmp_path):
    code, answer = probe(write(tmp_path, "qwen_lora_sft.yaml", LLAMA_FACTORY.format(precision="bf16")))
    assert risks(answer) == {} and code == 0
    assert not [f for f in answer["findings"] if f["severity"] != "info"]


def test_zero3_json_without_the_gather_saves_no_model(tmp_path):
    code, answer = probe(write(tmp_path, "ds_z3.json", json.dumps(ZERO3, indent=2)))
    risk = risks(answer)["save-export.zero3-empty-save"]
    assert risk["value"]["settings"] == {"export.zero3_gathers_on_save": False, "train.zero_stage": 3}
    assert "DeepSpeed's default" in risk["message"] and "zero_to_fp32.py" in risk["message"]
    assert code == 0


@pytest.mark.parametrize("change", [
    {"stage3_gather_16bit_weights_on_model_save": True},
    {"stage3_gather_fp16_weights_on_model_save": True},  # the name before DeepSpeed 0.6
    {"stage": 2},  # only ZeRO-3 shards the parameters themselves
], ids=["gather-on", "old-name", "stage-2"])
def test_zero_configs_that_save_a_model_are_quiet(tmp_path, change):
    config = json.loads(json.dumps(ZERO3))
    config["zero_optimization"].update(change)
    _, answer = probe(write(tmp_path, "ds.json", json.dumps(config)))
    assert risks(answer) == {}


@pytest.mark.parametrize("save, flagged", [("false", True), ("true", False)])
def test_accelerate_zero3_save_16bit_model(tmp_path, save, flagged):
    _, answer = probe(write(tmp_path, "accelerate.yaml", ACCELERATE.format(save=save)))
    assert ("save-export.zero3-empty-save" in risks(answer)) is flagged


def test_adam_epsilon_of_zero_in_a_training_script(tmp_path):
    script = write(tmp_path, "train.py", (
        "from transformers import Trainer, TrainingArguments\n"
        "args = TrainingArguments(output_dir='out', learning_rate=2e-5, adam_epsilon=0.0, bf16=True)\n"
        "trainer = Trainer(model=model, args=args, train_dataset=ds)\n"))
    found = risks(probe(script)[1])
    assert list(found) == ["nan-loss.adam-eps"] and "adam_epsilon=0.0" in found["nan-loss.adam-eps"]["message"]


def test_the_terminal_says_no_fault_but_a_risk(tmp_path):
    result = CliRunner().invoke(main, ["probe", str(write(tmp_path, "ds_z3.json", json.dumps(ZERO3)))])
    assert "setup.risk" in result.output and "Nothing wrong found" not in result.output
    assert "No fault seen in these artifacts, but 1 known risk" in " ".join(result.output.split())


def test_a_risk_adds_to_a_diagnosis_without_replacing_it(tmp_path):
    """`ask` with the config: the risk is a finding beside the ranked causes, and the settings it
    reads are the same evidence that ranks the cause."""
    config = write(tmp_path, "qwen_lora_sft.yaml", LLAMA_FACTORY.format(precision="fp16"))
    result = CliRunner().invoke(main, ["ask", "--no-input", "--json", "loss becomes nan after 200 steps",
                                       "--probe", str(config)])
    answer = json.loads(result.output)
    assert "nan-loss.fp16-on-bf16-model" in risks(answer)
    assert "nan-loss.fp16-on-bf16-model" in [c["id"] for c in answer["causes"][:2]]


def test_kb_show_lists_a_causes_risky_settings():
    result = CliRunner().invoke(main, ["kb", "show", "save-export.zero3-empty-save"])
    text = " ".join(result.output.split())
    assert "Risky settings: train.zero_stage == 3 and export.zero3_gathers_on_save == false" in text


def test_a_verl_launch_whose_micro_batch_exceeds_each_gpus_share(tmp_path):
    """256 prompts x 5 responses over 8 GPUs is 160 per GPU: a micro-batch of 16 fits, 200 does not."""
    command = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo \\\n"
               "    data.train_batch_size=1024 actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct \\\n"
               "    actor_rollout_ref.actor.ppo_mini_batch_size=256 \\\n"
               "    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro} \\\n"
               "    actor_rollout_ref.rollout.n=5 trainer.n_gpus_per_node=8 trainer.nnodes=1 $@\n")
    flagged = {micro: "nan-loss.zero-accumulation-steps" in risks(probe(write(tmp_path, f"run_{micro}.sh",
                                                                               command.format(micro=micro)))[1])
               for micro in (16, 200)}
    assert flagged == {16: False, 200: True}
