"""Trainer configs (YAML / JSON): which trainer wrote them, and their settings as flat key paths.

Recognised by their keys, not their names: DeepSpeed JSON (``zero_optimization``,
``train_micro_batch_size_per_gpu``; ``"auto"`` values are filled in later by the HF Trainer),
LLaMA-Factory (``finetuning_type``, ``cutoff_len``, ``template``), axolotl (``base_model`` +
``datasets`` / ``micro_batch_size``), torchtune (``_component_: torchtune...``), OLMo
(``model.d_model`` + ``optimizer`` + ``max_duration``), NeMo / Megatron-Core (``trainer`` +
``model.tensor_model_parallel_size``), nanotron (``parallelism`` with ``dp`` / ``tp`` / ``pp``, or
``tokens.sequence_length``), mlx-lm LoRA (``lora_parameters`` / ``fine_tune_type``),
accelerate (``distributed_type`` + ``mixed_precision``) with its FSDP block, and any config with
HF TrainingArguments names. YAML through ``yaml.safe_load`` semantics only (schema.Located),
files above MAX_BYTES refused, walks bounded in depth and size (an alias bomb stays cheap).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import ArtifactError
from .read import Setting, read_text, snake

MAX_DEPTH, MAX_LEAVES = 24, 20_000
TRAINERS = {"deepspeed": "deepspeed config", "llama-factory": "LLaMA-Factory config", "axolotl": "axolotl config",
            "torchtune": "torchtune config", "olmo": "OLMo config", "nemo": "NeMo / Megatron-Core config",
            "nanotron": "nanotron config", "mlx-lm": "mlx-lm LoRA config", "accelerate": "accelerate config",
            "hf": "training arguments", "generic": "training config"}
HF_KEYS = {"learning_rate", "per_device_train_batch_size", "gradient_accumulation_steps", "num_train_epochs",
           "warmup_steps", "warmup_ratio", "max_grad_norm", "bf16", "fp16", "lr_scheduler_type"}
# Keys a trainer uses in its own sense, renamed so that no fact's key matches them (a key matches a
# path ending in it): mlx-lm's num_layers counts the layers LoRA is applied to; torchtune's
# profiler.warmup_steps is torch.profiler's schedule (its LR warmup is lr_scheduler.num_warmup_steps);
# axolotl's diffusion.eps is a masking floor, not Adam's eps (a GRPO loss's bare epsilon, the PPO clip
# range, is no key of Adam's eps at all: rules/_facts/optimizer.yaml).
RENAMES = {"mlx-lm": {"num_layers": "lora_layers"},
           "torchtune": {"profiler.warmup_steps": "profiler.trace_warmup_steps"},
           "axolotl": {"diffusion.eps": "diffusion.mask_eps"}}
TRAINING_KEYS = HF_KEYS | {"lr", "optimizer", "optim", "batch_size", "micro_batch_size", "precision", "max_steps",
                           "epochs", "seq_len", "max_seq_length", "model"}


def read_config(path: Path) -> Any:
    """Parsed YAML or JSON, or None when the file is neither; ArtifactError when it parses but
    holds what no config may (a duplicate key, a number too long to convert), naming the line.
    A Markdown fence around it is dropped, and JSON that json refuses is read as YAML (``_pasted``)."""
    from ...knowledge.schema import KnowledgeFileError

    text = read_text(path)
    if text is None:
        return None
    text = _pasted(text)
    try:
        if path.suffix.lower() == ".json":
            try:
                return json.loads(text)
            except json.JSONDecodeError:  # pasted JSON: trailing commas, a printed dict
                return _located(text, path).data
        return _located(text, path).data
    except KnowledgeFileError as err:
        raise ArtifactError(path, f"{err} at line {err.line}") from None
    except json.JSONDecodeError:
        return None
    except ValueError as err:  # JSON or aliased YAML: an integer over Python's conversion limit
        if "integer string conversion" in str(err):
            raise ArtifactError(path, "number too long (over 4300 digits)") from None
        return None
    except RecursionError:
        return None
    except Exception as err:  # yaml.YAMLError without importing yaml up front
        if type(err).__module__.startswith("yaml"):
            return None
        raise


# A config copied out of an issue keeps its Markdown fence; a JSON config pasted by hand has
# `// ...` lines, trailing commas or Python's quoting (the last two YAML reads). Fence and comment
# lines are blanked, not removed, so that settings keep their line numbers.
_FENCE = re.compile(r"\A(\s*)```[\w+-]*[ \t]*(\n.*\n)[ \t]*```\s*\Z", re.DOTALL)
_LINE_COMMENT = re.compile(r"^[ \t]*//[^\n]*$", re.MULTILINE)


def _pasted(text: str) -> str:
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1) + fenced.group(2)
    return _LINE_COMMENT.sub("", text)


class _Plain:
    """Parsed YAML without line numbers: for text with anchors and aliases, whose node graph
    can be exponentially larger than the text (a "billion laughs" file)."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def line(self, _path: tuple) -> int:
        return 0


def _located(text: str, path: Path):
    if re.search(r"(?:^|[\s:,\[-])[&*][A-Za-z0-9_-]", text):
        import yaml

        return _Plain(yaml.safe_load(text))
    from ...knowledge.schema import Located

    return Located(text, str(path))


def trainer_of(data: dict) -> str | None:
    """Which trainer a config belongs to (TRAINERS key), or None for a config of something else."""
    keys = {str(k) for k in data}
    nested = {f"{k}.{j}" for k, v in data.items() if isinstance(v, dict) for j in v}
    if keys & {"zero_optimization", "train_micro_batch_size_per_gpu", "zero_allow_untested_optimizer"} or (
            "train_batch_size" in keys and keys & {"fp16", "bf16", "optimizer"}):
        return "deepspeed"
    if keys & {"finetuning_type", "cutoff_len"} or ("template" in keys and "stage" in keys):
        return "llama-factory"
    if "base_model" in keys and keys & {"datasets", "micro_batch_size", "sequence_len", "adapter"}:
        return "axolotl"
    if any(str(v.get("_component_", "")).startswith("torchtune.") for v in data.values() if isinstance(v, dict)):
        return "torchtune"
    if "model.d_model" in nested and keys & {"optimizer", "max_duration", "scheduler"}:
        return "olmo"
    if "trainer" in keys and nested & {"model.tensor_model_parallel_size", "model.micro_batch_size", "model.optim"}:
        return "nemo"
    if len(nested & {"parallelism.dp", "parallelism.tp", "parallelism.pp"}) >= 2 or "tokens.sequence_length" in nested:
        return "nanotron"
    if keys & {"lora_parameters", "fine_tune_type", "lora_layers"} or ("iters" in keys and "adapter_path" in keys):
        return "mlx-lm"
    if "distributed_type" in keys and keys & {"mixed_precision", "num_processes", "compute_environment"}:
        return "accelerate"
    if len(keys & HF_KEYS) >= 2:
        return "hf"
    if len(keys & TRAINING_KEYS) >= 2:
        return "generic"
    return None


def config_settings(path: Path) -> list[Setting]:
    """Every leaf of the config as a Setting with its line (YAML and JSON alike)."""
    text = read_text(path)
    if text is None:
        raise ArtifactError(path, "binary content, not a config")
    text = _pasted(text)
    import yaml

    try:
        doc = _located(text, path)
        data, line_of = doc.data, doc.line
    except (yaml.YAMLError, RecursionError):  # JSON that YAML refuses (tabs): read as JSON, no lines
        try:
            data, line_of = json.loads(text), (lambda _: 0)
        except (ValueError, RecursionError):
            raise ArtifactError(path, "not valid YAML or JSON") from None
    lines = text.splitlines()
    renames = RENAMES.get(trainer_of(data) if isinstance(data, dict) else "", {})
    out = []
    for keys, value in _leaves(data, ()):
        line = line_of(keys)
        quote = lines[line - 1].strip()[:120] if 0 < line <= len(lines) else f"{'.'.join(map(str, keys))}: {value}"
        path = ".".join(snake(str(k)) for k in keys if not isinstance(k, int))
        out.append(Setting(_renamed(path, renames), value, line, quote))
    return out


def _renamed(path: str, renames: dict[str, str]) -> str:
    """``path`` with a trainer's own-sense key (RENAMES) renamed, wherever that key is nested."""
    for old, new in renames.items():
        if path == old or path.endswith("." + old):
            return path[: len(path) - len(old)] + new
    return path


def _leaves(data: Any, path: tuple, budget: list | None = None) -> Iterator[tuple[tuple, Any]]:
    """(key path, value) for every scalar, and for short lists of scalars (betas: [0.9, 0.95])."""
    budget = budget if budget is not None else [MAX_LEAVES]
    if budget[0] <= 0 or len(path) > MAX_DEPTH:
        return
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _leaves(value, path + (key,), budget)
    elif isinstance(data, list) and data and all(isinstance(v, (int, float)) for v in data[:8]) and len(data) <= 8:
        budget[0] -= 1
        yield path, data
    elif isinstance(data, list):
        for i, value in enumerate(data[:64]):
            yield from _leaves(value, path + (i,), budget)
    else:
        budget[0] -= 1
        yield path, data
