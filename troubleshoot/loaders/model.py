"""Build a model to run: an HF checkpoint folder, or the user's own ``--model-factory``.

The model-running probes (``probes/gradflow.py``, ``probes/masks.py``) call ``model_for(ctx)``,
which decides once per command whether a model can and should be run, and caches the answer in
``ctx.options`` so both probes share one model:

- ``--static`` skips it; a model above the size caps for the device is skipped with a note on how
  to run it anyway (``--forward``); transformers missing for a checkpoint folder is a skip too.
- HF folders load through the Auto classes from local files only (``local_files_only=True``,
  ``trust_remote_code=False``): AutoModelForCausalLM, else AutoModelForMaskedLM (BERT-style),
  else AutoModel. Weights are read by transformers (safetensors, or weights-only torch pickles).
- ``--model-factory module:callable`` or ``path/to/file.py:callable`` imports the user's module
  (their own code, at their explicit request) and calls ``callable()`` with no arguments; it must
  return an ``nn.Module``. Declare a bidirectional encoder with ``model.is_causal = False``
  (default: causal). ``model.vocab_size`` and ``model.initializer_range`` are read when present.

The factory's model is called as ``model(input_ids=..., attention_mask=..., position_ids=...)``
(only the keywords its ``forward`` accepts; HF convention: mask 1 = attend, 0 = padding) and must
return logits ``[batch, seq, vocab]`` (a tensor, an object with ``.logits``, or a tuple whose
first element is the logits). Nothing is ever written next to the artifacts.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LlmfixError

SEED = 0                        # torch.manual_seed for factories, missing weights, synthetic tokens
CPU_MAX_PARAMS = 400_000_000    # above this, forward+backward on CPU takes minutes: skip by default
MEMORY_FRACTION = 0.5           # the run may take this share of free RAM / free GPU memory
BYTES_PER_PARAM = 8             # weights + grads, fp32 at the widest (the fp32 pass)
ACTIVATION_HEADROOM = 1.25      # activations of a capped batch on top of weights + grads
MAX_BATCH, MAX_SEQ = 8, 256     # a user batch is cut to this many rows x tokens ...
CPU_MAX_TOKENS = 512            # ... and on CPU to this many tokens in all (fewer rows)
SYNTH_BATCH, SYNTH_SEQ = 2, 64  # synthetic batch when none is given
CACHE_KEY = "_llmfix_model"     # ctx.options slot shared by gradflow and masks


@dataclass
class LoadedModel:
    """A built model plus what the probes need to feed it and read its output."""

    module: Any                 # torch.nn.Module, in eval() mode, on ``device``
    where: str                  # checkpoint folder or factory spec, for finding ``where``
    device: Any                 # torch.device
    dtype: Any                  # the checkpoint's dtype (torch.dtype)
    is_causal: bool
    causal_declared: bool       # False: assumed causal (factory without ``is_causal``)
    head: str                   # causal-lm | masked-lm | base
    vocab_size: int
    max_positions: int | None
    n_params: int
    accepts: frozenset = frozenset()   # forward keywords; "*" = any
    pad_token_id: int = 0
    initializer_range: float | None = None
    kind: str = ""              # class name, e.g. GPT2LMHeadModel
    notes: list[str] = field(default_factory=list)

    def takes(self, name: str) -> bool:
        return "*" in self.accepts or name in self.accepts

    def __call__(self, input_ids, attention_mask=None, position_ids=None):
        """One forward pass; returns logits (or the last hidden state of a base model)."""
        kwargs = {}
        if attention_mask is not None and self.takes("attention_mask"):
            kwargs["attention_mask"] = attention_mask
        if position_ids is not None and self.takes("position_ids"):
            kwargs["position_ids"] = position_ids
        if "use_cache" in self.accepts:
            kwargs["use_cache"] = False
        if "input_ids" in self.accepts:
            out = self.module(input_ids=input_ids, **kwargs)
        else:
            out = self.module(input_ids, **kwargs)
        return first_tensor(out)

    def loss(self, out, labels):
        """Mean cross-entropy in fp32 (shifted for causal LMs); a surrogate for base models."""
        import torch.nn.functional as F

        if out.dim() != 3 or out.shape[-1] != self.vocab_size:
            return out.float().pow(2).mean()  # no LM head: any scalar that reaches every weight
        logits = out.float()
        if self.is_causal:
            logits, labels = logits[:, :-1], labels[:, 1:]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                               ignore_index=-100)


@dataclass
class ModelRequest:
    """The decision for this command: a model to run, a skip to report once, or nothing."""

    model: LoadedModel | None = None
    skip: tuple[str, str, str] | None = None   # (finding id, severity, message)
    where: str = ""
    reported: bool = False

    def report_skip(self, obs) -> None:
        """Add the skip finding to ``obs`` the first time any probe asks."""
        if self.skip and not self.reported:
            obs.find(*self.skip, where=self.where)
            self.reported = True


def first_tensor(out: Any):
    """Logits from whatever a model returns: tensor, ``.logits``, ``last_hidden_state``, tuple."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    for name in ("logits", "last_hidden_state"):
        value = out.get(name) if isinstance(out, dict) else getattr(out, name, None)
        if isinstance(value, torch.Tensor):
            return value
    items = out.values() if isinstance(out, dict) else out if isinstance(out, (tuple, list)) else ()
    for item in items:
        if isinstance(item, torch.Tensor) and item.is_floating_point():
            return item
    raise LlmfixError(f"the model returned {type(out).__name__}; expected logits (a tensor, "
                      "an object with .logits, or a tuple starting with the logits)")


def resolve_device(pref: str):
    """``auto`` = CUDA when torch sees a GPU, else CPU; ``cuda`` without a GPU is a usage error."""
    import torch

    if pref == "cuda" and not torch.cuda.is_available():
        raise LlmfixError("--device cuda: torch sees no CUDA device (use --device auto or cpu)")
    if pref not in ("auto", "cpu", "cuda"):
        raise LlmfixError(f"--device {pref}: expected auto, cpu or cuda")
    return torch.device("cuda" if pref != "cpu" and torch.cuda.is_available() else "cpu")


def within_caps(n_params: int, device) -> tuple[bool, str]:
    """Decide run / skip from the parameter count and the free memory of the device."""
    need = int(n_params * BYTES_PER_PARAM * ACTIVATION_HEADROOM)
    if device.type == "cpu" and n_params > CPU_MAX_PARAMS:
        return False, f"{n_params / 1e6:.0f}M parameters, above the CPU cap of {CPU_MAX_PARAMS / 1e6:.0f}M"
    free = _free_memory(device)
    if free is not None and need > MEMORY_FRACTION * free:
        return False, (f"needs about {need / 2**30:.1f} GiB, more than {MEMORY_FRACTION:.0%} of the "
                       f"{free / 2**30:.1f} GiB free on {device.type}")
    return True, ""


def _free_memory(device) -> int | None:
    import torch

    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def model_for(ctx) -> ModelRequest:
    """The one model of this command (cached in ``ctx.options``); see the module docstring."""
    cached = ctx.options.get(CACHE_KEY)
    if cached is None:
        cached = ctx.options[CACHE_KEY] = _decide(ctx)
    return cached


def _decide(ctx) -> ModelRequest:
    folders = ctx.of_kind("hf-checkpoint")
    if not ctx.model_factory and not folders:
        return ModelRequest()
    where = ctx.model_factory or folders[0].path
    if ctx.static:
        return ModelRequest(skip=("forward.skipped", "info", "--static: gradient-flow and mask "
                                  "probes (which run the model) were skipped"), where=where)
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError:
        return ModelRequest(skip=("forward.skipped", "info", "model-running probes need torch "
                                  "(pip install 'llmfix[models]')"), where=where)
    device = resolve_device(ctx.device)
    if ctx.model_factory:
        lm = build_from_factory(ctx.model_factory, device, ctx.forward)
    else:
        lm = build_from_checkpoint(Path(folders[0].path), device, ctx.forward)
    if isinstance(lm, LoadedModel):
        return ModelRequest(model=lm, where=where)
    return ModelRequest(skip=lm, where=where)


def _caps_skip(n_params: int, why: str) -> tuple[str, str, str]:
    return ("forward.skipped", "info",
            f"gradient-flow and mask probes skipped: {why}; run them anyway with "
            f"`llmfix probe ... --forward` (or on a GPU with --device cuda)")


def build_from_checkpoint(folder: Path, device, force: bool = False):
    """Load an HF folder from local files only; returns a LoadedModel or a skip tuple."""
    import torch

    try:
        import transformers
        from transformers import AutoConfig
    except ModuleNotFoundError:
        return ("forward.skipped", "info", "gradient-flow and mask probes need transformers to "
                "build a checkpoint folder (pip install 'llmfix[models]'), or use --model-factory")
    quiet = _Quiet(transformers)
    with quiet:
        try:
            config = AutoConfig.from_pretrained(str(folder), local_files_only=True,
                                                trust_remote_code=False)
            auto = _auto_class(config)
            with torch.device("meta"):
                n_params = sum(p.numel() for p in auto.from_config(config).parameters())
        except Exception as err:  # unknown model_type, custom code, broken config.json
            return ("forward.skipped", "warning", f"cannot build the model from {folder.name}: "
                    f"{_one_line(err)}; give your model class with --model-factory")
        ok, why = within_caps(n_params, device)
        if not ok and not force:
            return _caps_skip(n_params, why)
        dtype = _config_dtype(config)
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(SEED)  # any weight missing from the folder is initialised alike
                module, info = auto.from_pretrained(
                    str(folder), local_files_only=True, trust_remote_code=False, dtype=dtype,
                    output_loading_info=True)
        except Exception as err:
            return ("forward.skipped", "warning",
                    f"transformers could not load {folder.name}: {_one_line(err)}")
    module.to(device).eval()
    notes = [f"{len(info.get(k) or ())} {k.replace('_', ' ')}" for k in ("missing_keys", "mismatched_keys")
             if info.get(k)]
    head = {"AutoModelForCausalLM": "causal-lm", "AutoModelForMaskedLM": "masked-lm"}.get(auto.__name__, "base")
    causal = head == "causal-lm" or (head == "base" and _config_causal(config))
    return LoadedModel(
        module=module, where=str(folder), device=device, dtype=_param_dtype(module),
        is_causal=causal, causal_declared=True, head=head, vocab_size=int(config.vocab_size),
        max_positions=_max_positions(config), n_params=n_params, accepts=_accepts(module),
        pad_token_id=_pad_id(config), initializer_range=getattr(config, "initializer_range", None),
        kind=type(module).__name__, notes=notes)


def synthetic_batch(lm: LoadedModel, batch: int = SYNTH_BATCH, seq: int = SYNTH_SEQ) -> dict:
    """Random tokens from the model's vocabulary, full mask, labels = inputs (seeded)."""
    import torch

    seq = min(seq, lm.max_positions or seq)
    gen = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, max(lm.vocab_size, 2), (batch, seq), generator=gen).to(lm.device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def batch_for(ctx, lm: LoadedModel) -> tuple[dict, str]:
    """The user's batch (cut to MAX_BATCH x MAX_SEQ, CPU_MAX_TOKENS on CPU) if usable, else synthetic.

    Returns the batch and a note saying which it is and why (shown in the summary finding).
    """
    import torch

    given = ctx.of_kind("batch")
    if not given:
        batch = synthetic_batch(lm)
        return batch, "synthetic tokens ({}x{})".format(*batch["input_ids"].shape)
    path = given[0].path
    try:
        tensors = _read_batch(Path(path))
    except LlmfixError as err:
        return synthetic_batch(lm), f"synthetic tokens ({err})"
    ids = tensors.get("input_ids")
    if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.dim() not in (1, 2):
        return synthetic_batch(lm), f"synthetic tokens ({Path(path).name} has no 2-D integer input_ids)"
    ids = ids.reshape(1, -1) if ids.dim() == 1 else ids
    if ids.numel() == 0:
        return synthetic_batch(lm), f"synthetic tokens ({Path(path).name} has empty input_ids)"
    limit = min(MAX_SEQ, lm.max_positions or MAX_SEQ, ids.shape[1])
    max_rows = MAX_BATCH if lm.device.type != "cpu" else max(1, min(MAX_BATCH, CPU_MAX_TOKENS // limit))
    full, rows, cols = ids.shape, slice(0, max_rows), slice(0, limit)

    def cut(t):  # the same rows and columns of a tensor laid out like input_ids, else None
        ok = isinstance(t, torch.Tensor) and t.numel() == full.numel()
        return t.reshape(full)[rows, cols].long() if ok else None

    ids, mask, labels = cut(ids), cut(tensors.get("attention_mask")), cut(tensors.get("labels"))
    if lm.vocab_size and (ids.min() < 0 or ids.max() >= lm.vocab_size):
        return synthetic_batch(lm), (f"synthetic tokens ({Path(path).name} holds token ids outside "
                                     f"[0, {lm.vocab_size}); see the batch probe)")
    if mask is None:
        mask = torch.ones_like(ids)
    note = f"{Path(path).name} ({ids.shape[0]}x{ids.shape[1]} tokens" + (
        f" of {full[0]}x{full[1]}, cut to the caps)" if ids.shape != full else ")")
    if labels is None:
        labels = ids.masked_fill(mask == 0, -100)
    elif not (labels != -100).any():
        labels = ids.clone()
        note += "; its labels have no supervised token, so input_ids serve as targets"
    return ({"input_ids": ids.to(lm.device), "attention_mask": mask.to(lm.device),
             "labels": labels.to(lm.device)}, note)


def _read_batch(path: Path) -> dict:
    """input_ids / attention_mask / labels through the batch loader; ragged records masked."""
    from .batch import read

    batch = read(path)
    seqs = {k: v for k, v in batch.seqs.items() if k in ("input_ids", "attention_mask", "labels")}
    if "input_ids" in seqs and batch.lengths is not None:
        valid = batch.valid
        mask = seqs.get("attention_mask")
        seqs["attention_mask"] = (mask if mask is not None and mask.shape == valid.shape else 1) * valid.long()
        if "labels" in seqs and seqs["labels"].shape == valid.shape:
            seqs["labels"] = seqs["labels"].masked_fill(~valid, -100)
    return seqs


def _auto_class(config):
    """CausalLM for decoders (``is_decoder``, *ForCausalLM / *LMHeadModel), MaskedLM for BERT."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM
    from transformers.models.auto import modeling_auto as ma

    causal = set(ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
    masked = set(ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES.values())
    archs = list(getattr(config, "architectures", None) or [])
    mtype = getattr(config, "model_type", "")
    if any(a in causal or a.endswith("ForCausalLM") for a in archs):
        return AutoModelForCausalLM
    if any(a in masked or a.endswith("ForMaskedLM") for a in archs):
        return AutoModelForMaskedLM
    if getattr(config, "is_decoder", False) and mtype in ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return AutoModelForCausalLM
    if mtype in ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return AutoModelForMaskedLM
    if mtype in ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return AutoModelForCausalLM
    return AutoModel


def _config_causal(config) -> bool:
    """Decoder or encoder from an HF config: the architecture's class, ``is_decoder``, else any
    model type without a masked-LM head (the default assumption is causal)."""
    archs = list(getattr(config, "architectures", None) or [])
    if any(a.endswith("ForMaskedLM") for a in archs):
        return False
    if getattr(config, "is_decoder", False) or any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs):
        return True
    try:
        from transformers.models.auto import modeling_auto as ma
    except ModuleNotFoundError:
        return True
    mtype = getattr(config, "model_type", "")
    return mtype not in ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES


def build_from_factory(spec: str, device, force: bool = False):
    """Import ``module:callable`` or ``file.py:callable``, call it, check it is an nn.Module."""
    import torch

    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise LlmfixError(f"--model-factory {spec}: expected module:callable or path/to/file.py:callable")
    module = _import_target(spec, target)
    fn = getattr(module, attr, None)
    if fn is None:
        raise LlmfixError(f"--model-factory {spec}: {target} has no attribute {attr!r}")
    if not callable(fn):
        raise LlmfixError(f"--model-factory {spec}: {attr} is a {type(fn).__name__}, not callable")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        try:
            model = fn()
        except Exception as err:
            raise LlmfixError(f"--model-factory {spec}: calling {attr}() failed: {_one_line(err)}") from None
    if not isinstance(model, torch.nn.Module):
        raise LlmfixError(f"--model-factory {spec}: {attr}() returned {type(model).__name__}, "
                          "expected a torch.nn.Module")
    n_params = sum(p.numel() for p in model.parameters())
    ok, why = within_caps(n_params, device)
    if not ok and not force:
        return _caps_skip(n_params, why)
    config = getattr(model, "config", None)
    declared = getattr(model, "is_causal", None)
    if isinstance(declared, bool):
        causal = declared
    elif config is not None and (getattr(config, "architectures", None) or getattr(config, "model_type", None)):
        causal, declared = _config_causal(config), True
    else:
        causal = True
    vocab = getattr(model, "vocab_size", None) or getattr(config, "vocab_size", None) or _embedding_rows(model)
    model.to(device).eval()
    return LoadedModel(
        module=model, where=spec, device=device, dtype=_param_dtype(model), is_causal=causal,
        causal_declared=declared is not None, head="causal-lm" if causal else "masked-lm",
        vocab_size=int(vocab or 0), max_positions=getattr(model, "max_positions", None)
        or (_max_positions(config) if config is not None else None), n_params=n_params,
        accepts=_accepts(model), pad_token_id=_pad_id(config) if config is not None else 0,
        initializer_range=getattr(model, "initializer_range", None)
        or getattr(config, "initializer_range", None), kind=type(model).__name__)


def _import_target(spec: str, target: str):
    """A ``.py`` path is loaded from its file; a dotted name is imported with the cwd on sys.path."""
    if target.endswith(".py") or os.sep in target or "/" in target:
        path = Path(target)
        if not path.is_file():
            raise LlmfixError(f"--model-factory {spec}: no such file {target}")
        name = "llmfix_factory_" + path.stem
        mod_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = module  # dataclasses and pickling look their module up here
        sys.path.insert(0, str(path.resolve().parent))  # let it import its siblings
        try:
            mod_spec.loader.exec_module(module)
        except Exception as err:
            sys.modules.pop(name, None)
            raise LlmfixError(f"--model-factory {spec}: importing {target} failed: {_one_line(err)}") from None
        finally:
            sys.path.remove(str(path.resolve().parent))
        return module
    added = os.getcwd() not in sys.path
    if added:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as err:
        if err.name and target.startswith(err.name):
            raise LlmfixError(f"--model-factory {spec}: no module named {target!r}") from None
        raise LlmfixError(f"--model-factory {spec}: importing {target} failed: {_one_line(err)}") from None
    except Exception as err:
        raise LlmfixError(f"--model-factory {spec}: importing {target} failed: {_one_line(err)}") from None
    finally:
        if added:
            sys.path.remove(os.getcwd())


def _accepts(module) -> frozenset:
    params = inspect.signature(module.forward).parameters.values()
    names = {p.name for p in params}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        names.add("*")
    return frozenset(names)


def _embedding_rows(model) -> int | None:
    import torch

    get = getattr(model, "get_input_embeddings", None)
    emb = get() if callable(get) else next((m for m in model.modules() if isinstance(m, torch.nn.Embedding)), None)
    return getattr(emb, "num_embeddings", None)


def _param_dtype(module):
    import torch

    return next((p.dtype for p in module.parameters() if p.is_floating_point()), torch.float32)


def _config_dtype(config):
    import torch

    value = getattr(config, "dtype", None)
    if isinstance(value, str):
        value = getattr(torch, value.replace("torch.", ""), None)
    return value if isinstance(value, torch.dtype) and value.is_floating_point else torch.float32


def _max_positions(config) -> int | None:
    for name in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _pad_id(config) -> int:
    value = getattr(config, "pad_token_id", None)
    vocab = getattr(config, "vocab_size", 0) or 0
    return value if isinstance(value, int) and 0 <= value < max(vocab, 1) else 0


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:200]


class _Quiet:
    """Silence transformers' progress bars and warnings while loading (stdout stays JSON-clean)."""

    def __init__(self, transformers) -> None:
        self.logging = transformers.utils.logging

    def __enter__(self):
        self.level = self.logging.get_verbosity()
        self.bars = self.logging.is_progress_bar_enabled()
        self.logging.set_verbosity_error()
        self.logging.disable_progress_bar()
        return self

    def __exit__(self, *exc) -> None:
        self.logging.set_verbosity(self.level)
        if self.bars:
            self.logging.enable_progress_bar()
