"""Launch commands, training scripts, trainer configs and console output: each realistic sample
(tests/setup_samples/, one per trainer) is recognised by content and gives the expected facts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from troubleshoot.cli import main
from troubleshoot.loaders import detect
from troubleshoot.probes import ProbeContext, run_all

SAMPLES = Path(__file__).parent / "setup_samples"

CASES = {
    "llamafactory_lora_sft.yaml": ("trainer-config", {
        "train.stage": "sft", "train.finetune_method": "lora", "train.lora_rank": 8, "train.seq_len": 2048,
        "train.micro_batch_size": 1, "train.grad_accum_steps": 8, "train.lr": 1e-4, "train.warmup_ratio": 0.1,
        "train.precision": "bf16", "train.framework": "hf-trainer"}),
    "axolotl_lora.yml": ("trainer-config", {
        "train.seq_len": 4096, "train.finetune_method": "lora", "train.lora_rank": 32, "train.lora_alpha": 16,
        "train.grad_accum_steps": 4, "train.micro_batch_size": 2, "train.lr": 0.0002,
        "train.gradient_checkpointing": True, "train.attn_impl": "flash-attn", "train.warmup_iterations": 10,
        "optimizer.weight_decay": 0.0}),
    "torchtune_lora_single_device.yaml": ("trainer-config", {
        "train.lora_rank": 8, "train.lora_alpha": 16, "train.micro_batch_size": 2, "optimizer.weight_decay": 0.01,
        "train.lr": 3e-4, "train.warmup_iterations": 100, "train.grad_accum_steps": 8,
        "train.gradient_checkpointing": True, "train.precision": "bf16", "train.framework": "pytorch"}),
    "olmo_1b.yaml": ("trainer-config", {
        "model.hidden_size": 2048, "model.num_heads": 16, "model.num_layers": 16, "train.seq_len": 2048,
        "train.lr": 4e-4, "optimizer.weight_decay": 0.1, "optimizer.beta1": 0.9, "optimizer.beta2": 0.95,
        "train.warmup_iterations": 2000, "train.global_batch_size": 2048, "train.micro_batch_size": 8,
        "train.precision": "bf16", "train.grad_clip": 1.0}),
    "nemo_megatron_gpt.yaml": ("trainer-config", {
        "train.precision": "fp16", "train.grad_clip": 1.0, "train.micro_batch_size": 4, "train.global_batch_size": 256,
        "tp.size": 2, "train.pp_size": 1, "train.seq_len": 2048, "model.num_layers": 24, "model.hidden_size": 2048,
        "model.num_heads": 16, "model.initializer_range": 0.02, "train.lr": 2e-4, "optimizer.beta2": 0.98,
        "train.warmup_iterations": 500, "train.parallelism": "tensor", "train.framework": "megatron"}),
    "nanotron_llama.yaml": ("trainer-config", {
        "tp.size": 2, "train.pp_size": 2, "train.zero_stage": 1, "train.seq_len": 4096, "train.micro_batch_size": 4,
        "train.grad_accum_steps": 4, "train.lr": 4e-4, "train.warmup_iterations": 2000, "train.grad_clip": 1.0,
        "optimizer.beta2": 0.95, "optimizer.eps": 1e-8, "model.num_layers": 22, "train.precision": "bf16"}),
    "mlx_lora_config.yaml": ("trainer-config", {
        "train.finetune_method": "lora", "train.micro_batch_size": 4, "train.lr": 1e-5, "train.seq_len": 2048,
        "train.lora_rank": 8, "train.gradient_checkpointing": False}),
    "ds_zero3_auto.json": ("trainer-config", {
        "train.zero_stage": 3, "train.parallelism": "zero", "train.framework": "deepspeed"}),
    "ds_zero2_fp16.json": ("trainer-config", {
        "train.zero_stage": 2, "train.precision": "fp16", "train.grad_clip": 1.0, "train.global_batch_size": 256,
        "train.micro_batch_size": 4, "train.grad_accum_steps": 8, "train.lr": 3e-5, "optimizer.beta2": 0.999,
        "optimizer.eps": 1e-8, "train.warmup_iterations": 500}),
    "accelerate_fsdp.yaml": ("trainer-config", {"train.precision": "fp16", "train.zero_stage": 3}),
    "accelerate_deepspeed.yaml": ("trainer-config", {
        "train.precision": "bf16", "train.zero_stage": 2, "train.grad_clip": 1.0, "train.grad_accum_steps": 4}),
    # a bash script that calls python within its first 60 characters was once read as Python
    "verl_grpo.sh": ("launch-script", {
        "train.global_batch_size": 64, "train.lr": 1e-6, "train.ppo_mini_batch_size": 16,
        "train.ppo_micro_batch_size_per_gpu": 32, "train.rollout_n": 4, "train.gpus_per_node": 4}),
    "pretrain_gpt_345m.sh": ("launch-script", {
        "tp.size": 2, "train.pp_size": 2, "model.num_layers": 24, "model.hidden_size": 1024, "model.num_heads": 16,
        "train.seq_len": 1024, "train.micro_batch_size": 4, "train.global_batch_size": 16, "train.lr": 0.00015,
        "train.warmup_ratio": 0.01, "train.grad_clip": 1.0, "optimizer.beta2": 0.95,
        "model.initializer_range": 0.006, "train.precision": "fp16", "optimizer.weight_decay": 0.01,
        "train.parallelism": "tensor", "train.framework": "megatron"}),
    "deepspeed_launch.sh": ("launch-script", {
        "train.micro_batch_size": 4, "train.grad_accum_steps": 2, "train.warmup_iterations": 0, "train.lr": 2e-5,
        "train.gradient_checkpointing": True, "train.precision": "fp16"}),
    "accelerate_launch.sh": ("launch-script", {
        "train.precision": "bf16", "train.lr": 5e-6, "train.warmup_ratio": 0.03, "train.grad_clip": 0.0,
        "train.attn_impl": "flash-attn"}),
    "llamafactory_cli.sh": ("launch-script", {
        "train.lr": 1e-4, "train.seq_len": 4096, "train.finetune_method": "lora", "train.lora_rank": 16}),
    "sft_trl.py": ("training-script", {
        "model.dtype": "bf16", "train.attn_impl": "flash-attn", "train.lora_rank": 64, "train.lora_alpha": 16,
        "train.lr": 2e-4, "train.micro_batch_size": 2, "train.grad_accum_steps": 16, "train.seq_len": 4096,
        "train.precision": "bf16", "train.warmup_iterations": 100, "train.grad_clip": 1.0, "optimizer.beta2": 0.95,
        "train.gradient_checkpointing": True, "train.framework": "hf-trainer"}),
    "custom_loop_fp16.py": ("training-script", {
        "train.lr": 1e-3, "optimizer.beta1": 0.9, "optimizer.beta2": 0.95, "optimizer.eps": 1e-8,
        "optimizer.weight_decay": 0.1, "train.grad_clip": 1.0, "model.dtype": "fp16",
        "fp16overflow.params_loaded_fp16": True, "fp16overflow.mask_fill_large": True,
        "mask.additive_fill_unsafe": True, "data.labels.pad_not_ignored": True}),
    # settings kept as module constants and passed on by name: the constants' values, and the
    # per-device batch (4) rather than the global BATCH_SIZE (128) that the key batch_size also matches
    "lora_module_constants.py": ("training-script", {
        "train.micro_batch_size": 4, "train.lr": 3e-4, "train.epochs": 3, "train.seq_len": 512, "train.lora_rank": 16,
        "train.lora_alpha": 32, "train.kbit_base": True, "train.precision": "fp16", "train.grad_accum_steps": None}),
    # a DeepSpeed config dict in the script whose values are module constants: the constants' values
    "deepspeed_dict_constants.py": ("training-script", {
        "train.micro_batch_size": 2, "train.zero_stage": 3, "train.lr": 2e-5, "train.grad_clip": 1.0,
        "train.precision": "bf16", "train.grad_accum_steps": 8}),
    "traceback_console.txt": ("log", {"data.tokens.out_of_range": True, "train.lr": None}),
}


def _probe(path: Path):
    artifact = detect(path)
    return artifact, run_all(ProbeContext([artifact], static=True))


@pytest.mark.parametrize("name", sorted(CASES))
def test_sample_gives_expected_facts(name):
    kind, expected = CASES[name]
    artifact, obs = _probe(SAMPLES / name)
    assert artifact.kind == kind
    got = {k: obs.facts[k].value if k in obs.facts else None for k in expected}
    assert got == pytest.approx(expected) if all(isinstance(v, (int, float)) for v in expected.values()) else got == expected
    for fact in obs.facts.values():  # every fact names the words it came from
        assert fact.span or fact.note


def test_deepspeed_auto_values_are_listed_not_guessed():
    _, obs = _probe(SAMPLES / "ds_zero3_auto.json")
    summary = next(f for f in obs.findings if f.id == "setup.settings")
    assert "left 'auto'" in summary.message and "optimizer.params.lr" in summary.message
    assert "train.lr" not in obs.facts and "train.precision" not in obs.facts


def test_script_findings_name_their_lines():
    _, obs = _probe(SAMPLES / "custom_loop_fp16.py")
    where = {f.id: f.where for f in obs.findings}
    assert where["setup.model_half"].endswith(":4")
    assert where["setup.mask_fill"].endswith(":11")
    assert where["setup.labels_unmasked"].endswith(":17")
    assert {f.id: f.severity for f in obs.findings}["setup.mask_fill"] == "warning"  # fp16: -1e9 overflows


def test_traceback_signatures_are_findings_with_line_numbers():
    _, obs = _probe(SAMPLES / "traceback_console.txt")
    found = {f.id: f for f in obs.findings}
    assert found["signature.cuda_index_assert"].where.endswith("traceback_console.txt:4")
    assert found["signature.cuda_index_assert"].value["count"] == 2
    assert found["signature.device_side_assert"].where.endswith(":15")


def test_probe_ranks_the_cause_the_traceback_names(tmp_path):
    console = tmp_path / "stderr"  # not named like a log, no metric line: console output by content
    lines = (SAMPLES / "traceback_console.txt").read_text().splitlines()
    console.write_text("\n".join(line for line in lines if "'loss'" not in line) + "\n")
    result = CliRunner().invoke(main, ["probe", str(console), "--json"])
    diag = json.loads(result.stdout)
    assert diag["artifacts"][0]["kind"] == "console"
    assert diag["causes"][0]["id"] == "nan-loss.token-out-of-range"
    evidence = diag["causes"][0]["evidence"][0]
    assert evidence["from"] == "probe:console" and "srcIndex < srcSelectDimSize" in evidence["span"]


def test_console_on_stdin():
    text = (SAMPLES / "traceback_console.txt").read_text()
    result = CliRunner().invoke(main, ["probe", "-", "--json"], input=text)
    diag = json.loads(result.stdout)
    assert diag["artifacts"] == [{"path": "-", "kind": "console", "detail": "standard input"}]
    assert any(f["id"] == "signature.cuda_index_assert" and f["where"] == "-:4" for f in diag["findings"])
    assert result.exit_code == 1  # an error signature is a problem found


def test_clean_launch_script_implies_no_symptom():
    result = CliRunner().invoke(main, ["probe", str(SAMPLES / "pretrain_gpt_345m.sh"), "--json"])
    diag = json.loads(result.stdout)
    assert result.exit_code == 0 and diag["symptoms"] == [] and diag["causes"] == []


def test_ask_with_a_config_uses_its_settings():
    result = CliRunner().invoke(main, ["ask", "loss spikes then diverges", "--no-input", "--json",
                                       "--probe", str(SAMPLES / "ds_zero2_fp16.json")])
    diag = json.loads(result.stdout)
    cause = next(c for c in diag["causes"] if c["id"] == "loss-spike.fp16-precision")
    assert any(e["fact"] == "train.precision" and e["from"] == "probe:setup" for e in cause["evidence"])


def test_unparsable_python_is_one_line_error(tmp_path):
    bad = tmp_path / "train.py"
    bad.write_text("def broken(:\n    pass\n")
    result = CliRunner().invoke(main, ["probe", str(bad)])
    assert result.exit_code != 0 or "not valid Python" in result.output


def test_yaml_alias_bomb_stays_cheap(tmp_path):
    lines = ["a0: &a0 [lr, lr, lr, lr, lr, lr, lr, lr, lr]"]
    lines += [f"a{i}: &a{i} [*a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}]"
              for i in range(1, 9)]
    bomb = tmp_path / "config.yaml"
    bomb.write_text("learning_rate: 1e-4\nbf16: true\n" + "\n".join(lines) + "\n")
    artifact, obs = _probe(bomb)
    assert obs.facts["train.lr"].value == 1e-4


def test_a_verl_launch_script_confirms_a_zero_accumulation_count():
    """16 x 4 rollouts / 4 GPUs = 16 samples per GPU, below the micro-batch of 32: verl accumulates
    0 micro-batches and divides by zero (the script, not the user's words, says so)."""
    result = CliRunner().invoke(main, ["ask", "grad_norm is nan from the first step", "--probe",
                                       str(SAMPLES / "verl_grpo.sh"), "--no-input", "--json"])
    first = json.loads(result.stdout)["causes"][0]
    assert (first["id"], first["status"]) == ("nan-loss.zero-accumulation-steps", "confirmed")


def test_a_notebook_cell_is_read_as_python_without_its_shell_and_magic_lines(tmp_path):
    cell = tmp_path / "train.py"
    cell.write_text("!pip install unsloth trl\n%%time\nfrom trl import SFTTrainer\n"
                    "args = TrainingArguments(learning_rate=2e-4, fp16=True)\n")
    _, obs = _probe(cell)
    assert obs.facts["train.precision"].value == "fp16" and obs.facts["train.lr"].value == 2e-4


def test_an_indented_excerpt_of_a_script_is_read_as_python(tmp_path):
    """Users paste the lines that matter from inside a function, indentation and all."""
    excerpt = tmp_path / "train.py"
    excerpt.write_text("    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float16)\n"
                       "    tokenizer.pad_token = tokenizer.eos_token\n"
                       "    ...\n"
                       "    trainer = Trainer(model=model, args=args)\n")
    artifact, obs = _probe(excerpt)
    assert artifact.kind == "training-script"
    assert obs.facts["model.dtype"].value == "fp16" and obs.facts["model.pad_is_eos"].value is True
    bad = tmp_path / "broken.py"
    bad.write_text("    def broken(:\n        pass\n")
    result = CliRunner().invoke(main, ["probe", str(bad)])
    assert result.exit_code == 2 and "not valid Python" in result.output


def test_the_defaults_of_a_dataclass_config_are_its_settings(tmp_path):
    """HfArgumentParser / tyro configs keep their settings as dataclass field defaults; a
    default_factory or an expression is code, and a plain class is not a config."""
    script = tmp_path / "finetune.py"
    script.write_text("from dataclasses import dataclass, field\n\n"
                      "@dataclass\nclass TrainerConfig(BaseConfig):\n"
                      "    per_device_train_batch_size: int = field(default=4)\n"
                      "    learning_rate: float = 2e-5\n"
                      "    save_only_model: bool = field(default=True)\n"
                      "    lora_target: list = field(default_factory=list)\n\n"
                      "class Helper:\n    gradient_accumulation_steps: int = 8\n")
    _, obs = _probe(script)
    assert obs.facts["train.micro_batch_size"].value == 4 and obs.facts["train.lr"].value == 2e-5
    assert obs.facts["train.save_only_model"].value is True
    assert "train.grad_accum_steps" not in obs.facts


def test_weights_only_checkpoints_are_read_from_a_trainer_config(tmp_path):
    """save_only_model (HF Trainer) leaves the optimizer, scheduler and RNG state out of checkpoints."""
    config = tmp_path / "qwen_lora_sft.yaml"
    config.write_text("stage: sft\nfinetuning_type: lora\nsave_steps: 500\nsave_only_model: true\nbf16: true\n")
    _, obs = _probe(config)
    assert obs.facts["train.save_only_model"].value is True


@pytest.mark.parametrize("name,text,key,fact,value,line", [
    ("config.yaml", "```yaml\nstage: sft\nfinetuning_type: lora\nlearning_rate: 1.0e-4\nbf16: true\n```\n",
     "bf16", "train.precision", "bf16", 5),                                 # copied with its Markdown fence
    ("ds_config.json", '{\n  "train_micro_batch_size_per_gpu": 4,\n  // ZeRO-2\n  "zero_optimization": {"stage": 2},\n'
                       '  "fp16": {"enabled": true,},\n}\n', "fp16.enabled", "train.precision", "fp16", 5),
    ("ds_config.json", "{'train_micro_batch_size_per_gpu': 4, 'zero_optimization': {'stage': 3}}\n",
     "zero_optimization.stage", "train.zero_stage", 3, 1),                 # a printed Python dict
    ("config.yaml", "parallelism:\n  dp: 4\n  pp: 2\n  pp_engine: afab\n  tp: 1\n",
     "parallelism.pp", "train.pp_size", 2, 3),                             # nanotron's parallelism block alone
])
def test_a_config_pasted_from_an_issue_is_read(tmp_path, name, text, key, fact, value, line):
    """A fence, `//` lines, trailing commas and Python quoting: the settings and their lines."""
    from troubleshoot.loaders.setup.config import config_settings

    path = tmp_path / name
    path.write_text(text)
    artifact, obs = _probe(path)
    assert artifact.kind == "trainer-config" and obs.facts[fact].value == value
    assert {s.path: s.line for s in config_settings(path)}[key] == line


@pytest.mark.parametrize("value,expected", [("4", True), ("8", True), ("0", False)])
def test_a_numeric_switch_on_the_command_line_reads_like_the_config_number(tmp_path, value, expected):
    """`--quantization_bit 4` in a launch script loads the model in 4 bits, as `quantization_bit: 4` in a
    config does: the command line hands the value over as text, and a number there is a switch too."""
    script = tmp_path / "train.sh"
    script.write_text(f"python src/train_bash.py \\\n    --stage sft \\\n    --fp16 \\\n    --quantization_bit {value}\n")
    _, obs = _probe(script)
    assert obs.facts["train.kbit_base"].value is expected
