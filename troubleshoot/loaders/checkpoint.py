"""Recognise model checkpoints by what they contain and open them without running their code.

Four layouts, told apart by their files rather than their names alone:

- Hugging Face folders: config.json + model.safetensors / sharded ``*.safetensors`` + index /
  pytorch_model.bin (+ shards), tokenizer and generation files beside them. A Trainer
  ``checkpoint-N/`` adds optimizer.pt, scheduler.pt, trainer_state.json, rng_state.pth and
  training_args.bin. training_args.bin is a pickle of arbitrary objects and rng_state.pth holds
  numpy objects: both are listed as skipped, never loaded. A parent ``output_dir`` holding
  several ``checkpoint-N`` is opened at its latest one; the others are listed.
- Megatron-LM / Megatron-DeepSpeed / DeepSpeed folders: ``latest`` and/or
  ``latest_checkpointed_iteration.txt``, ``global_step*/`` or ``iter_*/`` holding
  ``mp_rank_*_model_states.pt``, ``layer_*-model_*-model_states.pt``, ``mp_rank_*/model_optim_rng.pt``
  and ZeRO ``*optim_states.pt``. Megatron pickles its command line as an argparse Namespace (let
  through: a plain attribute bag); files that need any other class are refused and listed, and
  the rest is read.
- Bare state dicts: one .safetensors / .pt / .bin, possibly nested under model/state_dict/module;
  a lone optimizer or scheduler state is a ``state-dict`` too (detail says which).

``open_checkpoint`` returns a ``Checkpoint`` (cached per path) that the config, weights and
optimizer probes share; the loader's own findings (latest pointing nowhere, refused pickles) are
in ``Checkpoint.issues``; ``probes.run_all`` reports them once per checkpoint.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ArtifactError
from ..files import read_json
from ..observations import Artifact, Finding
from .tensors import (
    PICKLE_SUFFIXES,
    file_maps,
    is_optimizer_state,
    iter_safetensors,
    list_safetensors,
    load_pickle,
    release,
    unwrap_state_dict,
)
from .tokenizer import MAX_JSON_BYTES
from .torchzip import as_tensor, is_tensor

# iteration numbers of at most 18 digits: int() of a 5000-digit folder name or pointer would raise
CKPT_DIR = re.compile(r"^checkpoint-(\d{1,18})$")
ITER_DIR = re.compile(r"^(?:global_step|iter_)(\d{1,18})$")
MODEL_STATES = re.compile(r"(model_states|model_optim_rng)\.pt$")
OPTIM_STATES = re.compile(r"(optim_states|distrib_optim|optimizer)\.pt$")
HF_WEIGHTS = re.compile(r"^(model|pytorch_model|adapter_model)(-\d+-of-\d+)?\.(safetensors|bin)$")
TOKENIZER_FILES = ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json", "vocab.json",
                   "added_tokens.json", "chat_template.jinja")
# Read on purpose never: arbitrary pickles, or nothing to diagnose in them.
SKIPPED = {"training_args.bin": "a pickle of arbitrary Python objects (TrainingArguments); never loaded",
           "rng_state.pth": "RNG state (numpy objects); nothing to diagnose, not loaded"}
BATCH_KEYS = ("input_ids", "attention_mask", "labels", "position_ids", "token_type_ids")


@dataclass
class Checkpoint:
    """What one checkpoint path holds: files by role, small JSON files already parsed."""

    path: Path                      # what the user gave
    root: Path                      # folder actually probed (latest checkpoint-N, global_stepN ...)
    kind: str                       # hf-checkpoint | megatron-checkpoint | state-dict
    detail: str = ""
    config: dict | None = None      # config.json, or Megatron's args as a dict
    config_source: str = ""
    generation_config: dict | None = None
    tokenizer: dict[str, Path] = field(default_factory=dict)
    weight_files: list[Path] = field(default_factory=list)
    optimizer_files: list[Path] = field(default_factory=list)
    scheduler_file: Path | None = None
    trainer_state: dict | None = None
    iteration: int | None = None    # Megatron iteration / Trainer global step, when recorded
    iteration_source: str = ""
    iterations: list[int] = field(default_factory=list)  # all saved steps beside this one
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    issues: list[Finding] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # ds_config, lr scheduler dicts, ...

    @property
    def artifact(self) -> Artifact:
        return Artifact(str(self.path), self.kind, self.detail)

    def rel(self, p: Path) -> str:
        """A file's name relative to what the user gave, for ``where`` fields."""
        try:
            return str(p.relative_to(self.path if self.path.is_dir() else self.path.parent))
        except ValueError:
            return str(p)


_CACHE: dict[tuple, Checkpoint] = {}
CACHE_SIZE = 8  # checkpoints of one command (the sniffer and three probes open the same ones)


def _remember(key: tuple, ckpt: Checkpoint) -> Checkpoint:
    """Keep the newest CACHE_SIZE opened checkpoints (a long-lived process must not grow)."""
    _CACHE.pop(key, None)
    _CACHE[key] = ckpt
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    return ckpt


def _signature(p: Path) -> tuple:
    entries = [p] + (sorted(p.iterdir()) if p.is_dir() else [])
    return tuple(_stamp(e) for e in entries[:500])


def _stamp(e: Path) -> tuple:
    """Name, size and mtime of a folder entry; a dangling symlink (half-deleted hub cache) is its own."""
    try:
        st = e.stat()
    except OSError:
        st = e.lstat()
    return str(e), st.st_size, st.st_mtime_ns


def open_checkpoint(path: str | Path) -> Checkpoint:
    """Open a checkpoint folder or state-dict file (cached); ArtifactError when nothing is readable."""
    p = Path(path)
    if not p.exists():
        raise ArtifactError(p, "no such file or directory")
    key = _signature(p)
    if key in _CACHE:
        return _CACHE[key]
    ckpt = _open_dir(p) if p.is_dir() else _open_file(p)
    if ckpt is None:
        raise ArtifactError(p, "not a checkpoint: no config, weights or training state found")
    return _remember(key, ckpt)


def sniff(path: Path) -> Artifact | None:
    """The checkpoint Artifact for ``path``, None when it is not one (a batch, a log ...)."""
    p = Path(path)
    if p.is_dir():
        return open_checkpoint(p).artifact if _looks_like_checkpoint(p) else None
    if p.suffix == ".safetensors" or p.suffix in PICKLE_SUFFIXES or p.name == "config.json":
        ckpt = _open_file(p)
        if ckpt is not None:
            return _remember(_signature(p), ckpt).artifact
    return None


# --- folders -----------------------------------------------------------------------------------

def _looks_like_checkpoint(p: Path) -> bool:
    names = {e.name for e in p.iterdir()}
    if names & {"config.json", "adapter_config.json", "latest", "latest_checkpointed_iteration.txt",
                "model.safetensors.index.json", "pytorch_model.bin.index.json", "optimizer.pt"}:
        return True
    if any(HF_WEIGHTS.match(n) or MODEL_STATES.search(n) or OPTIM_STATES.search(n) for n in names):
        return True
    return any((p / n).is_dir() and (CKPT_DIR.match(n) or ITER_DIR.match(n) or n.startswith("mp_rank_"))
               for n in names)


def _open_dir(p: Path) -> Checkpoint | None:
    subdirs = [e for e in p.iterdir() if e.is_dir()]
    has_model = (p / "config.json").is_file() or (p / "adapter_config.json").is_file()
    if has_model and not any(CKPT_DIR.match(d.name) for d in subdirs):
        return _open_hf(p, path=p)  # also HF Trainer + DeepSpeed (global_stepN/ inside)
    if (p / "latest").is_file() or (p / "latest_checkpointed_iteration.txt").is_file() \
            or any(ITER_DIR.match(d.name) for d in subdirs):
        return _open_megatron_root(p)
    if any(MODEL_STATES.search(e.name) for e in p.iterdir()) or any(d.name.startswith("mp_rank_") for d in subdirs):
        return _open_megatron_iteration(p, p, [])
    steps = sorted((int(CKPT_DIR.match(d.name).group(1)), d) for d in subdirs if CKPT_DIR.match(d.name))
    locked = [(d, why) for _, d in steps if (why := _unlistable(d))]
    steps = [(n, d) for n, d in steps if not any(d == x for x, _ in locked)]
    if locked and not steps and not has_model:
        raise ArtifactError(*locked[-1])
    if steps and not has_model:
        n, latest = steps[-1]
        ckpt = _open_hf(latest, path=p)
        ckpt.issues += [Finding("checkpoint.unreadable", "warning", f"not read: {why}; probed {latest.name} instead",
                                ckpt.rel(d)) for d, why in locked]
        others = ", ".join(d.name for _, d in steps[:-1])
        ckpt.detail = f"output_dir with {len(steps)} Trainer checkpoints; probing {latest.name}" + (
            f" (also {others})" if others else "")
        ckpt.iterations = [s for s, _ in steps]
        return ckpt
    ckpt = _open_hf(p, path=p)
    if steps:  # final model at the top, Trainer state in the latest checkpoint-N
        latest = steps[-1][1]
        sub = _open_hf(latest, path=p)
        for attr in ("optimizer_files", "scheduler_file", "trainer_state"):
            if not getattr(ckpt, attr):
                setattr(ckpt, attr, getattr(sub, attr))
        ckpt.iterations = [s for s, _ in steps]
        ckpt.detail += f"; Trainer state from {latest.name}"
    return ckpt


def _unlistable(folder: Path) -> str:
    """Why ``folder`` cannot be listed (a ``checkpoint-N/`` of another user, mode 700), or ''."""
    try:
        os.listdir(folder)
    except OSError as err:
        return f"cannot read the folder ({err.strerror or err})"
    return ""


def _read_json(path: Path) -> dict:
    data = read_json(path, MAX_JSON_BYTES)
    if not isinstance(data, dict):
        raise ArtifactError(path, "unexpected JSON (not an object)")
    return data


# Config keys that hold a count, a size or a token id: each must be an integer (or null).
_INT_KEY = re.compile(r"^(n_\w+|num_\w+|\w+_size|\w+_token_ids?|max_position_embeddings|d_model|d_ff|d_kv)$")
MAX_CONFIG_INT = 2 ** 40


def sane_config(cfg: dict) -> tuple[dict, list[str]]:
    """``cfg`` without the counts, sizes and token ids that are not integers in range, and what
    was wrong with each ("vocab_size is a string ('100')"), so that no probe computes with them."""
    clean, bad = dict(cfg), []
    for name, value in cfg.items():
        if isinstance(value, dict) and name.endswith("_config"):
            clean[name], inner = sane_config(value)
            bad += [f"{name}.{why}" for why in inner]
        elif _INT_KEY.match(name) and value is not None and (why := _not_int(name, value)):
            del clean[name]
            bad.append(f"{name} {why}")
    return clean, bad


def _not_int(name: str, value: Any) -> str | None:
    low = -1 if "token_id" in name else 0  # pad_token_id: -1 is an old Llama convention
    values = value if isinstance(value, list) else [value]  # eos_token_id lists, image_size [h, w]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int):
            return f"is {_kind(v)} ({str(v)[:40]!r}), expected an integer"
        if not low <= v <= MAX_CONFIG_INT:
            return f"= {str(v)[:40]} is out of range (expected {low} to 2**40)"
    return None


def _kind(v: Any) -> str:
    return {str: "a string", float: "a float", list: "a list", dict: "an object", bool: "a boolean"}.get(
        type(v), type(v).__name__)


def _index_problem(index: Path, files: dict[str, Path]) -> str:
    """What is wrong with a shard index ('' when nothing): a broken index must not hide the NaN in
    the shards that are there, so it is a finding, not a reason to stop."""
    try:
        weight_map = _read_json(index).get("weight_map", {})
    except ArtifactError as err:
        return err.problem
    if not isinstance(weight_map, dict):
        return "weight_map is not an object of tensor name -> shard file"
    wanted = sorted({str(v) for v in weight_map.values()})
    missing = [w for w in wanted if w not in files]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        return f"names shard {missing[0][:80]!r}{more}, not in the folder (loading this checkpoint fails)"
    return ""


def _open_hf(root: Path, path: Path) -> Checkpoint:
    entries = list(root.iterdir())
    files = {e.name: e for e in entries if e.is_file()}
    ckpt = Checkpoint(path=path, root=root, kind="hf-checkpoint")
    ckpt.unreadable += [(e, "not a regular file (a pipe or device); never opened" if e.exists()
                         else "a dangling symlink (its target is gone)")
                        for e in entries if not e.is_file() and not e.is_dir()]
    weights = sorted(f for n, f in files.items() if HF_WEIGHTS.match(n))
    safet = [f for f in weights if f.suffix == ".safetensors"]
    ckpt.weight_files = safet or weights  # both present: transformers reads the safetensors
    ckpt.issues += [Finding("checkpoint.bad_index", "error", f"{why}; probed the shards that are there",
                            ckpt.rel(files[index])) for index in ("model.safetensors.index.json",
                                                                  "pytorch_model.bin.index.json")
                    if index in files and (why := _index_problem(files[index], files))]
    config_name = next((n for n in ("config.json", "adapter_config.json") if n in files), None)
    if config_name:
        ckpt.config, bad = sane_config(_read_json(files[config_name]))
        ckpt.config_source = config_name
        ckpt.issues += [Finding("config.bad_value", "error", f"{config_name}: {why}; ignored", config_name)
                        for why in bad]
    elif ckpt.weight_files and not any(e.name == "config.json" for e, _ in ckpt.unreadable):
        raise ArtifactError(root, f"no config.json beside {ckpt.weight_files[0].name}: give the weight file "
                                  "itself to probe it as a bare state dict")
    if "generation_config.json" in files:
        ckpt.generation_config = _read_json(files["generation_config.json"])
    ckpt.tokenizer = {n: files[n] for n in TOKENIZER_FILES if n in files}
    for f in ckpt.weight_files:
        if f.suffix == ".safetensors":
            list_safetensors(f)  # truncated / corrupt shards fail here, naming the shard
    if "optimizer.pt" in files:
        ckpt.optimizer_files.append(files["optimizer.pt"])
    ckpt.scheduler_file = files.get("scheduler.pt")
    if "scaler.pt" in files:
        ckpt.extra["scaler_file"] = files["scaler.pt"]
    if "trainer_state.json" in files:
        try:
            ckpt.trainer_state = _read_json(files["trainer_state.json"])
        except ArtifactError as err:  # too large or broken: the rest of the folder is still worth probing
            ckpt.unreadable.append((files["trainer_state.json"], err.problem))
        step = (ckpt.trainer_state or {}).get("global_step")
        if isinstance(step, int):
            ckpt.iteration, ckpt.iteration_source = step, f"{ckpt.rel(files['trainer_state.json'])} global_step"
    elif CKPT_DIR.match(root.name):
        ckpt.iteration, ckpt.iteration_source = int(CKPT_DIR.match(root.name).group(1)), f"folder name {root.name}"
    for f in sorted(files.values()):
        key = "rng_state.pth" if re.match(r"rng_state(_\d+)?\.pth$", f.name) else f.name
        if key in SKIPPED:
            ckpt.skipped.append((f, SKIPPED[key]))
    for f in [w for w in ckpt.weight_files if w.suffix != ".safetensors"]:
        try:  # weights_only + mmap: cheap, and a refused pickle is known before any probe runs
            load_pickle(f, allow_namespace=True)
        except ArtifactError as err:
            ckpt.unreadable.append((f, err.problem))
            ckpt.weight_files.remove(f)
    if any(ITER_DIR.match(d.name) for d in root.iterdir() if d.is_dir()):
        try:  # HF Trainer + DeepSpeed: ZeRO optimizer shards in global_stepN/
            ds = _open_megatron_root(root)
            ckpt.optimizer_files += ds.optimizer_files
            ckpt.unreadable += ds.unreadable
            ckpt.issues += [i for i in ds.issues if not i.id.startswith("checkpoint.unsafe")]
            ckpt.extra.update(ds.extra)
        except ArtifactError as err:
            ckpt.unreadable.append((root, err.problem))
    _loader_issues(ckpt)
    if not (ckpt.config or ckpt.weight_files or ckpt.optimizer_files or ckpt.trainer_state):
        raise ArtifactError(root, "no config.json, weights or Trainer state in this folder")
    what = ["config"] if ckpt.config else []
    if ckpt.weight_files:
        n = len(ckpt.weight_files)
        first = ckpt.weight_files[0]
        what.append(f"{n} {first.suffix[1:]} shard{'s' * (n > 1)}" if n > 1 else first.name)
    if ckpt.optimizer_files or ckpt.trainer_state:
        what.append("Trainer state")
    ckpt.detail = ("Trainer " + root.name + ": " if CKPT_DIR.match(root.name) else "HF folder: ") + ", ".join(what)
    return ckpt


# --- Megatron / DeepSpeed ----------------------------------------------------------------------

def _pointer(p: Path) -> tuple[int | None, str | None]:
    with open(p, "rb") as f:  # a pointer names one folder: its first 4 KiB say it
        text = f.read(4096).decode("utf-8", errors="replace").strip()
    m = re.search(r"(?<!\d)(\d{1,18})$", text)
    return (int(m.group(1)) if m else None), text


def _open_megatron_root(p: Path) -> Checkpoint:
    dirs = {int(ITER_DIR.match(d.name).group(1)): d for d in p.iterdir() if d.is_dir() and ITER_DIR.match(d.name)}
    issues: list[Finding] = []
    pointers = {}
    for name in ("latest", "latest_checkpointed_iteration.txt"):
        if (p / name).is_file():
            pointers[name] = _pointer(p / name)
    targets = {n for n, _ in pointers.values() if n is not None}
    if len(targets) > 1:
        issues.append(Finding("checkpoint.latest_disagree", "warning",
                              "the 'latest' pointer files disagree: " + ", ".join(
                                  f"{k} = {t}" for k, (_, t) in pointers.items()), str(p), sorted(targets)))
    chosen = None
    for name, (n, text) in pointers.items():
        if text == "release":
            chosen = chosen or next((d for d in p.iterdir() if d.name == "release"), None)
        elif n is None or n not in dirs:
            issues.append(Finding("checkpoint.latest_missing", "error",
                                  f"{name} points to {text!r}, but no such iteration folder exists "
                                  f"(saved: {', '.join(d.name for _, d in sorted(dirs.items())) or 'none'}); "
                                  "resuming would fail or silently start from scratch", str(p / name), text))
        elif chosen is None:
            chosen = dirs[n]
    if chosen is None:
        if not dirs:
            raise ArtifactError(p, "no iteration folder (global_step*/ or iter_*/) to read"
                                   + ("; " + issues[0].message if issues else ""))
        chosen = dirs[max(dirs)]
        if pointers:
            issues.append(Finding("checkpoint.latest_fallback", "info",
                                  f"probing the newest folder on disk instead: {chosen.name}", str(chosen)))
    return _open_megatron_iteration(chosen, p, issues, iterations=sorted(dirs))


def _open_megatron_iteration(folder: Path, path: Path, issues: list[Finding],
                             iterations: list[int] | None = None) -> Checkpoint:
    ckpt = Checkpoint(path=path, root=folder, kind="megatron-checkpoint", issues=issues,
                      iterations=iterations or [])
    m = ITER_DIR.match(folder.name)
    if m:
        ckpt.iteration, ckpt.iteration_source = int(m.group(1)), f"folder name {folder.name}"
    files = sorted(f for f in folder.rglob("*") if f.is_file())
    if any(f.suffix == ".distcp" for f in files):
        ckpt.unreadable.append((folder, "torch_dist distributed checkpoint (.distcp): convert it to the legacy "
                                        "format first (Megatron --ckpt-convert-format torch)"))
    args_read = False
    for f in files:
        is_model, is_optim = bool(MODEL_STATES.search(f.name)), bool(OPTIM_STATES.search(f.name))
        if not (is_model or is_optim):
            continue
        try:
            obj = load_pickle(f, allow_namespace=True)
        except ArtifactError as err:
            ckpt.unreadable.append((f, err.problem))
            continue
        if isinstance(obj, dict):
            if isinstance(obj.get("iteration"), int):
                ckpt.iteration, ckpt.iteration_source = obj["iteration"], f"{ckpt.rel(f)} iteration"
            args = obj.get("args")
            if args is not None and not args_read and hasattr(args, "__dict__"):
                ckpt.config, ckpt.config_source, args_read = _plain(vars(args)), f"{ckpt.rel(f)} args", True
            for key in ("lr_scheduler", "opt_param_scheduler"):
                if isinstance(obj.get(key), dict):
                    ckpt.extra["lr_scheduler"] = _plain(obj[key])
            if isinstance(obj.get("ds_config"), dict):
                ckpt.extra["ds_config"] = _plain(obj["ds_config"])
            if is_model and unwrap_state_dict(obj):
                ckpt.weight_files.append(f)
            if is_optim or obj.get("optimizer") or "optimizer_state_dict" in obj:
                ckpt.optimizer_files.append(f)
        del obj
    _loader_issues(ckpt)
    if not (ckpt.weight_files or ckpt.optimizer_files):
        raise ArtifactError(folder, "nothing could be read safely: " + (
            "; ".join(f"{f.name}: {why}" for f, why in ckpt.unreadable[:3]) or "no model or optimizer state files"))
    n = len(ckpt.iterations)
    ckpt.detail = (f"{folder.name}: {len(ckpt.weight_files)} model-state file(s), "
                   f"{len(ckpt.optimizer_files)} optimizer file(s)"
                   + (f"; {n} iterations saved" if n > 1 else "")
                   + (f"; {len(ckpt.unreadable)} file(s) not readable safely" if ckpt.unreadable else ""))
    return ckpt


def _loader_issues(ckpt: Checkpoint) -> None:
    """Findings for files skipped on purpose (info) and files refused or unreadable (warning)."""
    for f, why in ckpt.skipped:
        unsafe = "pickle" in why
        ckpt.issues.append(Finding("checkpoint.unsafe_pickle_skipped" if unsafe else "checkpoint.skipped",
                                   "info", f"skipped: {why}", ckpt.rel(f)))
    no_weights = not ckpt.weight_files and any(HF_WEIGHTS.match(f.name) for f, _ in ckpt.unreadable)
    for f, why in ckpt.unreadable:
        unsafe = why.startswith("refused")
        weights = no_weights and HF_WEIGHTS.match(f.name)
        ckpt.issues.append(Finding(
            "checkpoint.unsafe_pickle_refused" if unsafe else "checkpoint.unreadable",
            "error" if weights else "warning",
            f"not read: {why}" + ("; no weights of this checkpoint could be read, so none were checked: give a "
                                  "safetensors copy of them" if weights else ""), ckpt.rel(f)))


def _plain(obj: Any, depth: int = 0) -> Any:
    """JSON-like copy of small config values (tensors and odd objects become None or str)."""
    if isinstance(obj, (bool, int, float, str)) or obj is None:
        return obj
    if isinstance(obj, dict) and depth < 4:
        return {str(k): _plain(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) and depth < 4 and len(obj) < 64:
        return [_plain(v, depth + 1) for v in obj]
    if is_tensor(obj):
        return as_tensor(obj).item() if obj.numel() == 1 else None
    return str(obj)[:80]


# --- single files ------------------------------------------------------------------------------

def _is_batch(keys) -> bool:
    """Batch columns, at the top or under a wrapper ({"batch": {"input_ids": ...}}), and no weights."""
    keys = [str(k) for k in keys]  # a pickled dict may have int or tuple keys
    return (any(k.rsplit(".", 1)[-1] in BATCH_KEYS for k in keys)
            and not any(k.endswith((".weight", ".bias")) for k in keys))


def _open_file(p: Path) -> Checkpoint | None:
    if p.name == "config.json":  # the config probe alone: ids, sizes, init range, tokenizer files beside it
        cfg = _read_json(p)
        if not any(k in cfg for k in ("model_type", "architectures", "hidden_size", "n_embd", "d_model")):
            return None
        ckpt = Checkpoint(path=p, root=p.parent, kind="hf-checkpoint", config=cfg, config_source="config.json",
                          detail="config.json only: weights not probed")
        if (p.parent / "generation_config.json").is_file():
            ckpt.generation_config = _read_json(p.parent / "generation_config.json")
        ckpt.tokenizer = {n: p.parent / n for n in TOKENIZER_FILES if (p.parent / n).is_file()}
        return ckpt
    ckpt = Checkpoint(path=p, root=p.parent, kind="state-dict")
    if p.suffix == ".safetensors":
        infos = list_safetensors(p)
        if not infos or _is_batch(i.name for i in infos):
            return None
        ckpt.weight_files, ckpt.detail = [p], f"safetensors state dict, {len(infos)} tensors"
        return ckpt
    if p.name in SKIPPED and p.name == "training_args.bin":
        raise ArtifactError(p, "training_args.bin is a pickle of arbitrary objects (TrainingArguments) and is "
                               "never loaded; give the checkpoint folder instead")
    if p.suffix not in PICKLE_SUFFIXES:
        return None
    obj = load_pickle(p, allow_namespace=True)
    if is_optimizer_state(obj) or (isinstance(obj, dict) and any(k in obj for k in (
            "optimizer_state_dict", "base_optimizer_state")) and not unwrap_state_dict(obj)):
        ckpt.optimizer_files, ckpt.detail = [p], "optimizer state"
        return ckpt
    if isinstance(obj, dict) and "base_lrs" in obj and "last_epoch" in obj:
        ckpt.scheduler_file, ckpt.detail = p, "LR scheduler state"
        return ckpt
    state = unwrap_state_dict(obj)
    if not state or _is_batch(state):
        return None
    ckpt.weight_files, ckpt.detail = [p], f"torch state dict, {len(state)} tensors"
    if isinstance(obj, dict):
        if isinstance(obj.get("iteration"), int):
            ckpt.iteration, ckpt.iteration_source = obj["iteration"], f"{p.name} iteration"
        if obj.get("optimizer") or obj.get("optimizer_state_dict"):
            ckpt.optimizer_files = [p]
        if getattr(obj.get("args"), "__dict__", None):
            ckpt.config, ckpt.config_source = _plain(vars(obj["args"])), f"{p.name} args"
    return ckpt


# --- streaming access for the probes -----------------------------------------------------------

def iter_weights(ckpt: Checkpoint) -> Iterator[tuple[Path, str, Any]]:
    """(file, tensor name, tensor) for every model tensor, one at a time.

    Safetensors tensors and lazily read pickle tensors are read as they are yielded; tensors
    that ``torch.load`` returned live in one mmap of the file whose pages are dropped after each
    tensor, so memory stays near the largest tensor whatever the checkpoint size.
    """
    for f in ckpt.weight_files:
        if f.suffix == ".safetensors":
            for name, t in iter_safetensors(f):
                yield f, name, t
            continue
        try:
            state = unwrap_state_dict(load_pickle(f, allow_namespace=True)) or {}
        except ArtifactError:
            continue  # already listed as unreadable at open time
        maps = file_maps(f)
        for name, value in state.items():
            t = as_tensor(value)
            yield f, name, t
            release(t, maps)
            del t


def weight_shapes(ckpt: Checkpoint) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape, from safetensors headers (no data read) or mmap'd pickles."""
    shapes: dict[str, tuple[int, ...]] = {}
    for f in ckpt.weight_files:
        if f.suffix == ".safetensors":
            shapes.update({i.name: i.shape for i in list_safetensors(f)})
            continue
        try:
            state = unwrap_state_dict(load_pickle(f, allow_namespace=True)) or {}
        except ArtifactError:
            continue
        shapes.update({k: tuple(v.shape) for k, v in state.items()})
    return shapes


def load_training_file(f: Path) -> tuple[Any | None, str]:
    """(object, "") for an optimizer / scheduler pickle, or (None, why it was not read).

    The checkpoint is left as opened: a probe reports its own read failures."""
    try:
        return load_pickle(f, allow_namespace=True), ""
    except ArtifactError as err:  # UnsafePickleError included
        return None, err.problem
