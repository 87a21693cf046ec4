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


SFT_SCRIPT = """from transformers import AutoTokenizer, AutoModelForCausalLM, Trainer, TrainingArguments
from transformers import DataCollatorForLanguageModeling, DataCollatorForSeq2Seq

tokenizer = AutoTokenizer.from_pretrained("mistralai/Mistral-7B-v0.1")
tokenizer.pad_token = {pad}


def to_text(example):
    return {{"text": f"### Instruction:\\n{{example['instruction']}}\\n### Response:\\n{{example['output']}}"{eos}}}


model = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-v0.1", torch_dtype=torch.bfloat16)
args = TrainingArguments(output_dir="out", learning_rate=2e-5, bf16=True, per_device_train_batch_size=4)
trainer = Trainer(model=model, args=args, train_dataset=train_ds, data_collator={collator})
trainer.train()
"""
MASKING = "DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm=False)"


def sft_script(tmp_path: Path, pad="tokenizer.eos_token", eos=" + tokenizer.eos_token", collator=MASKING) -> Path:
    return write(tmp_path, "sft.py", SFT_SCRIPT.format(pad=pad, eos=eos, collator=collator))


def test_an_eos_the_script_appends_is_masked_by_its_own_collator(tmp_path):
    script = sft_script(tmp_path)
    code, answer = probe(script)
    risk = risks(answer)["repetition.eos-masked"]
    assert risk["value"]["settings"] == {"data.collator_masks_pad": True, "data.eos.appended": True,
                                         "model.pad_is_eos": True}
    assert risk["where"] == str(script) and "mlm=False" in risk["message"] and code == 0
    assert answer["symptoms"] == []  # a risk, not a diagnosis


@pytest.mark.parametrize("change", [
    {"pad": '"<pad>"'},                                    # a pad token of its own
    {"collator": "DataCollatorForSeq2Seq(tokenizer, label_pad_token_id=-100)"},  # pads labels, masks no id
    {"collator": "DataCollatorForLanguageModeling(tokenizer=tokenizer)"},  # masked LM, not this masking
], ids=["own-pad-token", "seq2seq-collator", "mlm-collator"])
def test_the_safe_way_to_pad_is_quiet(tmp_path, change):
    assert "repetition.eos-masked" not in risks(probe(sft_script(tmp_path, **change))[1])


def test_no_eos_appended_or_no_collator_seen_is_no_risk(tmp_path):
    """Pretraining on chunks (the transformers course pads with EOS and this collator, but its text
    has no EOS to lose), or an excerpt without the collator: a fact stays unknown, no warning."""
    chunks = sft_script(tmp_path, eos="")
    excerpt = write(tmp_path, "excerpt.py", "tokenizer.pad_token = tokenizer.eos_token\n"
                                            "texts = [t + tokenizer.eos_token for t in texts]\n")
    assert [risks(probe(path)[1]) for path in (chunks, excerpt)] == [{}, {}]


def test_trls_completion_only_collator_masks_the_pad_id_too(tmp_path):
    script = sft_script(tmp_path, collator='DataCollatorForCompletionOnlyLM("### Response:", tokenizer=tokenizer)')
    assert "repetition.eos-masked" in risks(probe(script)[1])


SWIFT = """# 22GB
CUDA_VISIBLE_DEVICES=0 \\
swift sft \\
    --model Qwen/Qwen2.5-7B-Instruct \\
    --train_type lora \\
    --dataset 'AI-ModelScope/alpaca-gpt4-data-zh#500' \\
              AI-ModelScope/alpaca-gpt4-data-en#500 \\
    --torch_dtype {dtype} \\
    --learning_rate 1e-4 \\
    --lora_rank 8
"""


@pytest.mark.parametrize("dtype, flagged", [("float16", True), ("bfloat16", False)])
def test_an_ms_swift_command_in_fp16_on_a_bf16_model(tmp_path, dtype, flagged):
    """ms-swift trains with fp16 AMP when --torch_dtype is float16 (ModelArguments._init_mixed_precision);
    'name#500' is a sample count, not a comment, so the flags after it are read."""
    _, answer = probe(write(tmp_path, "swift.sh", SWIFT.format(dtype=dtype)))
    read = {k: v for f in answer["findings"] if f["id"] == "setup.settings" for k, v in f["value"].items()}
    assert read["train.lora_rank"] == 8 and read["model.pretrained_dtype"] == "bf16"
    assert ("nan-loss.fp16-on-bf16-model" in risks(answer)) is flagged


OPENRLHF = """deepspeed --module openrlhf.cli.train_sft \\
   --data.max_len 2048 \\
   --train.micro_batch_size 2 \\
   {model}--ds.zero_stage 2 \\
   --ds.param_dtype {dtype} \\
   --adam.lr 5e-6
"""
VERL = """python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo \\
    {model}actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype={dtype} \\
    actor_rollout_ref.actor.ppo_mini_batch_size=256 trainer.n_gpus_per_node=8
"""


@pytest.mark.parametrize("template, model", [
    (OPENRLHF, "--model.model_name_or_path meta-llama/Meta-Llama-3-8B \\\n   "),
    (VERL, "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct \\\n    "),
], ids=["openrlhf", "verl"])
def test_rl_trainers_param_dtype_fp16_on_a_bf16_model(tmp_path, template, model):
    """OpenRLHF --ds.param_dtype fp16 turns on DeepSpeed fp16; verl's FSDP MixedPrecision computes in
    param_dtype. bf16, or no model named (its release dtype unknown), is no risk."""
    flagged = {(dtype, bool(name)): "nan-loss.fp16-on-bf16-model" in risks(probe(write(
                   tmp_path, f"run_{dtype}_{bool(name)}.sh", template.format(model=name, dtype=dtype)))[1])
               for dtype in ("fp16", "bf16") for name in (model, "")}
    assert flagged == {("fp16", True): True, ("bf16", True): False, ("fp16", False): False, ("bf16", False): False}


@pytest.mark.parametrize("precision, flagged", [("fp16", True), ("bf16", False)])
def test_a_trl_trainer_given_the_model_by_name(tmp_path, precision, flagged):
    """SFTTrainer("Qwen/...") loads the model itself: its name says the release dtype."""
    script = write(tmp_path, "sft.py", "from trl import SFTConfig, SFTTrainer\n"
                   f"trainer = SFTTrainer(\"Qwen/Qwen2.5-0.5B\", train_dataset=ds, args=SFTConfig(output_dir='out', "
                   f"{precision}=True))\ntrainer.train()\n")
    assert ("nan-loss.fp16-on-bf16-model" in risks(probe(script)[1])) is flagged
