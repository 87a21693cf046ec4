"""Python training scripts, read with ``ast`` only (never imported, never run).

Settings come from the keyword arguments of the calls that configure training:
``TrainingArguments(learning_rate=2e-5, bf16=True)`` -> ``trainingarguments.learning_rate``,
``LoraConfig(r=8)`` -> ``loraconfig.r``, ``from_pretrained(..., torch_dtype=torch.float16)`` ->
``from_pretrained.torch_dtype = "torch.float16"``, ``AdamW(..., betas=(0.9, 0.95))``,
``clip_grad_norm_(params, 1.0)``, the model name of ``from_pretrained("Qwen/Qwen2-7B")``; and from
dict literals assigned to a name ending in ``config`` / ``args`` (a DeepSpeed config written inline),
from literals assigned to a name at module level (``LEARNING_RATE = 3e-4``), and from the literal
defaults of ``@dataclass`` fields (``per_device_train_batch_size: int = field(default=4)``).
Besides settings, ``Pattern`` rows name code that is known to break training (probes/setup turns
them into findings and facts):
``model.half()``, ``tokenizer.pad_token = tokenizer.eos_token``, a collator that masks every label equal
to the pad id and an EOS appended to the training text (together with pad = EOS: EOS is never
trained), labels copied from input_ids
with no -100 masking anywhere, masks filled with -1e9 / float('-inf') / finfo(float32).min,
``model.state_dict`` rebound to a ``get_peft_model_state_dict`` lambda (alpaca-lora's finetune.py),
and reward functions that return a distance such as ``abs(20 - len(c))``, which RL maximises.
"""
from __future__ import annotations

import ast
import functools
import re
import textwrap
from pathlib import Path
from typing import Any, NamedTuple

from ...errors import ArtifactError
from .read import Setting, read_text, shebang, snake

CONFIG_CALLS = ("arguments", "args", "config", "configs")  # TrainingArguments, SFTConfig, LoraConfig, ...
# TRL trainers also take the model as a Hub name: SFTTrainer("Qwen/Qwen2.5-0.5B", ...)
TRL_TRAINERS = ("sfttrainer", "dpotrainer", "grpotrainer", "orpotrainer", "ktotrainer", "rlootrainer")
CALLS = {"from_pretrained", "adam", "adamw", "adamw8bit", "pagedadamw", "pagedadamw8bit", "fusedadam", "lion", "sgd",
         "adafactor", "clip_grad_norm_", "get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup",
         "get_scheduler", "dict", "autocast", "gradscaler", "prepare_model_for_kbit_training", "initialize",
         *TRL_TRAINERS}
POSITIONAL = {"clip_grad_norm_": ("parameters", "max_norm"), "from_pretrained": ("pretrained_model_name_or_path",),
              **{trainer: ("model",) for trainer in TRL_TRAINERS},
              "get_linear_schedule_with_warmup": ("optimizer", "num_warmup_steps", "num_training_steps"),
              "get_cosine_schedule_with_warmup": ("optimizer", "num_warmup_steps", "num_training_steps")}
# calls that are a setting by themselves
CALL_SETTINGS = {"gradient_checkpointing_enable": ("gradient_checkpointing", True),
                 "get_peft_model": ("peft_type", "lora"), "prepare_model_for_kbit_training": ("peft_type", "lora")}
FP32_MIN = ("finfo(torch.float32).min", "finfo(torch.float).min")
UNSAFE_FILL = 65504.0        # the largest fp16 magnitude


class Pattern(NamedTuple):
    """Code known to break training, found at ``line``."""

    id: str     # half | pad_is_eos | collator_masks_pad | eos_appended | labels_unmasked | mask_fill |
                # peft_state_dict_override | reward_distance
    line: int
    quote: str


def is_python(path: Path, head: str) -> bool:
    return path.suffix.lower() == ".py" or "python" in shebang(head)


MAX_SCRIPT_BYTES = 256 << 10  # a training script is tens of KB; dense code takes ~0.5 KB of AST a byte
MAX_NESTING = 100          # AST depth: ast.unparse / literal_eval recurse, a deeper tree would overflow


def parse(path: Path) -> tuple[ast.Module, list[str]]:
    """The script's syntax tree and lines (parsed once per command: settings and patterns share it)."""
    st = Path(path).stat()
    return _parse(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=2)
def _parse(path: str, size: int, _mtime: int) -> tuple[ast.Module, list[str]]:
    if size > MAX_SCRIPT_BYTES:
        raise ArtifactError(path, f"larger than {MAX_SCRIPT_BYTES >> 10} KiB: not read as a training script")
    text = read_text(Path(path))
    if text is None:
        raise ArtifactError(path, "binary content, not a Python script")
    try:
        tree = _parse_excerpt(text, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:  # MemoryError: the parser's own stack
        line = getattr(err, "lineno", None)
        where = f" (line {line})" if line else ""
        why = getattr(err, "msg", None) or str(err) or "nested too deeply"
        raise ArtifactError(path, f"not valid Python{where}: {why}") from None
    if _depth(tree) > MAX_NESTING:
        raise ArtifactError(path, f"expressions nested deeper than {MAX_NESTING} levels: not read as a training script")
    return tree, text.splitlines()


def _parse_excerpt(text: str, path: str) -> ast.Module:
    """A whole script, an excerpt copied from inside a function or class (users paste the lines
    that matter with their indentation), or a notebook cell (its `!pip install` and `%%time` lines
    are not Python): parsed once the common indent and those lines are removed, line numbers kept."""
    try:
        return ast.parse(text, filename=path)
    except SyntaxError:
        cleaned = textwrap.dedent(_NOTEBOOK_LINE.sub("", text))
        if cleaned == text:
            raise
        return ast.parse(cleaned, filename=path)


_NOTEBOOK_LINE = re.compile(r"^[ \t]*[!%][^\n]*$", re.MULTILINE)


def _depth(tree: ast.AST) -> int:
    """The deepest node's depth, without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def script_settings(path: Path) -> list[Setting]:
    tree, lines = parse(path)
    out: list[Setting] = _module_constants(tree, lines)
    constants = {setting.path: setting.value for setting in out}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            out += _call_settings(node, lines, constants)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            names = [t.id.lower() for t in node.targets if isinstance(t, ast.Name)]
            if any(n.endswith(("config", "args", "cfg")) for n in names):
                out += _dict_settings(node.value, "", constants)
        elif isinstance(node, ast.ClassDef) and _is_dataclass(node):
            out += _field_defaults(node, lines)
    return out


def _is_dataclass(node: ast.ClassDef) -> bool:
    """``@dataclass`` / ``@dataclasses.dataclass(...)``: the form of HF's ``HfArgumentParser``
    argument classes, TRL's script arguments and tyro / simple-parsing experiment configs."""
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if (target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")) == "dataclass":
            return True
    return False


def _field_defaults(node: ast.ClassDef, lines: list[str]) -> list[Setting]:
    """The defaults of a dataclass's fields (``save_only_model: bool = field(default=True)``,
    ``lr: float = 3e-4``): they are the run's settings unless a command-line flag overrides them,
    and a config kept as a dataclass shows nothing else. Only literal defaults: a default_factory
    or an expression is code."""
    out = []
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None):
            continue
        value = stmt.value
        if isinstance(value, ast.Call) and _call_name(value) == "field":
            value = next((kw.value for kw in value.keywords if kw.arg == "default"), None)
        if isinstance(value, ast.Constant) and isinstance(value.value, (bool, int, float, str)):
            out.append(Setting(f"{snake(node.name)}.{snake(stmt.target.id)}", value.value, stmt.lineno,
                               _quote(lines, stmt)))
    return out


def _module_constants(tree: ast.Module, lines: list[str]) -> list[Setting]:
    """Literals assigned to a name at the top of the script: many training scripts keep their
    settings there (``MICRO_BATCH_SIZE = 4``, ``LEARNING_RATE = 3e-4``, ``load_in_4bit = True``) and
    pass the names on, which a call's keywords then show only as names. Only scalars: a name bound
    to a call or an expression is code, not a setting."""
    out = []
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        if not isinstance(target, ast.Name) or not isinstance(node.value, ast.Constant):
            continue
        value = node.value.value
        if isinstance(value, (bool, int, float, str)):
            out.append(Setting(snake(target.id), value, node.lineno, _quote(lines, node)))
    return out


def _call_settings(node: ast.Call, lines: list[str], constants: dict[str, Any]) -> list[Setting]:
    """The keyword (and known positional) arguments of a call that configures training; an argument
    that names a module constant (``learning_rate=LEARNING_RATE``) has that constant's value."""
    name = _call_name(node).lower()
    out = [Setting(*CALL_SETTINGS[name], node.lineno, _quote(lines, node))] if name in CALL_SETTINGS else []
    if not (name in CALLS or name.endswith(CONFIG_CALLS)):
        return out
    for i, arg in enumerate(node.args[:len(POSITIONAL.get(name, ()))]):
        out.append(Setting(f"{name}.{POSITIONAL[name][i]}", _value(arg, constants), node.lineno,
                           f"{name}(... {ast.unparse(arg)[:60]})"))
    for kw in node.keywords:
        if kw.arg is None:
            continue
        if isinstance(kw.value, ast.Dict):
            out += _dict_settings(kw.value, f"{name}.{snake(kw.arg)}.", constants)
        else:
            out.append(Setting(f"{name}.{snake(kw.arg)}", _value(kw.value, constants), kw.value.lineno,
                               f"{kw.arg}={ast.unparse(kw.value)[:80]}"))
    return out


def _dict_settings(node: ast.Dict, prefix: str, constants: dict[str, Any], depth: int = 0) -> list[Setting]:
    """The entries of a config dict written in the script (a DeepSpeed config, ``training_args``),
    nested keys joined with dots; a value that names a module constant has the constant's value."""
    out = []
    for key, value in zip(node.keys, node.values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) or depth > 8:
            continue
        if isinstance(value, ast.Dict):
            out += _dict_settings(value, f"{prefix}{snake(key.value)}.", constants, depth + 1)
        else:
            out.append(Setting(f"{prefix}{snake(key.value)}", _value(value, constants), value.lineno,
                               f"{key.value!r}: {ast.unparse(value)[:80]}"))
    return out


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _value(node: ast.AST, constants: dict[str, Any] | None = None) -> Any:
    """A literal as its value, a module constant's name as the constant's value, anything else as
    its source text (torch.float16, args.lr)."""
    if constants and isinstance(node, ast.Name) and snake(node.id) in constants:
        return constants[snake(node.id)]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.unparse(node)[:200]


def _quote(lines: list[str], node: ast.AST) -> str:
    line = getattr(node, "lineno", 0)
    return lines[line - 1].strip()[:160] if 0 < line <= len(lines) else ""


def patterns(path: Path) -> list[Pattern]:
    """Code known to break training (see the module docstring)."""
    tree, lines = parse(path)
    out: list[Pattern] = []
    labels_copied: list[ast.AST] = []
    masks_labels = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            if attr == "half" and "model" in ast.unparse(node.func.value).lower():
                out.append(Pattern("half", node.lineno, _quote(lines, node)))
            elif attr in ("masked_fill", "masked_fill_") and len(node.args) >= 2 and _unsafe_fill(node.args[1]):
                out.append(Pattern("mask_fill", node.lineno, _quote(lines, node)))
            elif attr == "to" and "model" in ast.unparse(node.func.value).lower() and \
                    any("float16" in ast.unparse(a) or ast.unparse(a).endswith(".half")
                        for a in [*node.args, *(k.value for k in node.keywords)]):
                out.append(Pattern("half", node.lineno, _quote(lines, node)))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and \
                (_unsafe_fill(node.left) or _unsafe_fill(node.right)) and "mask" in ast.unparse(node).lower():
            out.append(Pattern("mask_fill", node.lineno, _quote(lines, node)))
        if isinstance(node, ast.Assign):
            target = ast.unparse(node.targets[0])
            value = ast.unparse(node.value)
            if target.endswith(".pad_token") and value.endswith(".eos_token") or \
                    target.endswith(".pad_token_id") and value.endswith(".eos_token_id"):
                out.append(Pattern("pad_is_eos", node.lineno, _quote(lines, node)))
            if _is_labels(node.targets[0]) and "input_ids" in value and "-100" not in value:
                labels_copied.append(node)
            if target.endswith(".state_dict") and _calls(node.value, "get_peft_model_state_dict"):
                out.append(Pattern("peft_state_dict_override", node.lineno, _quote(lines, node)))
        if isinstance(node, ast.Call) and _masks_pad_ids(node):
            out.append(Pattern("collator_masks_pad", node.lineno, _quote(lines, node)))
        if _appends_eos(node):
            out.append(Pattern("eos_appended", node.lineno, _quote(lines, node)))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "reward" in node.name.lower():
            out += [Pattern("reward_distance", r.lineno, _quote(lines, r)) for r in _distance_returns(node)]
        if _masks_labels(node):
            masks_labels = True
    if labels_copied and not masks_labels:
        out.append(Pattern("labels_unmasked", labels_copied[0].lineno, _quote(lines, labels_copied[0])))
    return out


def _masks_pad_ids(call: ast.Call) -> bool:
    """A collator that sets every label equal to the pad id to -100: transformers'
    DataCollatorForLanguageModeling with ``mlm=False`` (``labels[labels == pad_token_id] = -100``
    in its torch_call; TRL's collator of the same name takes no ``mlm`` and pads labels with -100
    instead), and TRL's DataCollatorForCompletionOnlyLM, which subclasses it."""
    name = _call_name(call)
    if name == "DataCollatorForCompletionOnlyLM":
        return True
    return name == "DataCollatorForLanguageModeling" and any(
        kw.arg == "mlm" and isinstance(kw.value, ast.Constant) and kw.value.value is False for kw in call.keywords)


def _appends_eos(node: ast.AST) -> bool:
    """The EOS token added to the training text: ``text + tokenizer.eos_token``, an f-string with
    ``{tokenizer.eos_token}``, or a tokenizer loaded with ``add_eos_token=True``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return any(_is_eos_token(side) for side in (node.left, node.right))
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.FormattedValue) and _is_eos_token(v.value) for v in node.values)
    return isinstance(node, ast.keyword) and node.arg == "add_eos_token" and \
        isinstance(node.value, ast.Constant) and node.value.value is True


def _is_eos_token(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "eos_token"


def _is_labels(target: ast.AST) -> bool:
    if isinstance(target, ast.Name):
        return target.id == "labels"
    if isinstance(target, ast.Subscript):
        key = target.slice
        return isinstance(key, ast.Constant) and key.value == "labels"
    return False


def _masks_labels(node: ast.AST) -> bool:
    """Some -100 / IGNORE_INDEX / ignore_index, or a collator that masks labels itself."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
            isinstance(node.operand, ast.Constant) and node.operand.value == 100:
        return True
    if isinstance(node, ast.Name) and "ignore" in node.id.lower():
        return True
    if isinstance(node, ast.keyword) and node.arg and "ignore_index" in node.arg:
        return True
    return isinstance(node, ast.Name) and node.id in ("DataCollatorForLanguageModeling", "DataCollatorForSeq2Seq",
                                                      "DataCollatorForCompletionOnlyLM", "SFTTrainer")


def _calls(node: ast.AST, name: str) -> bool:
    """Whether ``name(...)`` is called anywhere inside ``node`` (a lambda body, a ``__get__`` chain)."""
    return any(isinstance(n, ast.Call) and _call_name(n) == name for n in ast.walk(node))


def _distance_returns(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """Returns of a reward function whose value is an unsigned distance, ``abs(a - b)`` (alone or per item
    of a list comprehension): the reward grows the further the completion is from the target, and GRPO /
    PPO / RLOO maximise it. ``-abs(...)`` and ``1 / (1 + abs(...))`` are fine and not matched."""
    found = []
    for node in ast.walk(func):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = node.value.elt if isinstance(node.value, (ast.ListComp, ast.GeneratorExp)) else node.value
        if isinstance(value, ast.Call) and _call_name(value) == "float" and len(value.args) == 1:
            value = value.args[0]
        if isinstance(value, ast.Call) and _call_name(value) == "abs" and len(value.args) == 1 and \
                isinstance(value.args[0], ast.BinOp) and isinstance(value.args[0].op, ast.Sub):
            found.append(node)
    return found


def _unsafe_fill(node: ast.AST) -> bool:
    """-1e9, float('-inf'), -math.inf, torch.finfo(torch.float32).min: beyond what fp16 holds."""
    text = ast.unparse(node).replace(" ", "")
    if any(m in text for m in FP32_MIN) or "inf" in text.lower() and text.startswith(("-", "float(")):
        return True
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > UNSAFE_FILL
