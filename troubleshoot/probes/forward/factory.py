"""Build the user's own model from ``--model-factory module:callable`` or ``file.py:callable``.

For a model no checkpoint folder describes (custom code, a training script's own class), the user
names a callable; it is imported (their own code, at their explicit request) and called with no
arguments, and must return an ``nn.Module``. Declare a bidirectional encoder with
``model.is_causal = False`` (default: causal). ``model.vocab_size``, ``model.initializer_range``,
``model.max_positions`` and an HF-style ``model.config`` are read when present.

Every mistake in the spec, the import or the call is a usage error (exit 2) of one line that
starts with ``--model-factory <spec>:``.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from ...errors import LlmfixError
from .caps import caps_skip, seeded
from .hf import config_causal, config_max_positions, config_pad_id
from .loaded import LoadedModel, accepts, one_line, param_dtype


def build_from_factory(spec: str, device, force: bool = False):
    """Import ``module:callable`` or ``file.py:callable``, call it, check it is an nn.Module.

    Returns a LoadedModel, or a skip tuple when the model is above the caps: unlike a folder, a
    factory's model can only be measured once it is built.
    """
    import torch

    fn, attr = _factory_callable(spec)
    with seeded():
        try:
            model = fn()
        except Exception as err:
            raise _factory_error(spec, f"calling {attr}() failed: {one_line(err)}") from None
    if not isinstance(model, torch.nn.Module):
        raise _factory_error(spec, f"{attr}() returned {type(model).__name__}, expected a torch.nn.Module")
    n_params = sum(p.numel() for p in model.parameters())
    skip = caps_skip(n_params, device, force)
    if skip:
        return skip
    config = getattr(model, "config", None)
    causal, declared = _causality(model, config)
    vocab = getattr(model, "vocab_size", None) or getattr(config, "vocab_size", None) or _embedding_rows(model)
    model.to(device).eval()
    return LoadedModel(
        module=model, where=spec, device=device, dtype=param_dtype(model), is_causal=causal,
        causal_declared=declared, head="causal-lm" if causal else "masked-lm",
        vocab_size=int(vocab or 0), max_positions=getattr(model, "max_positions", None)
        or (config_max_positions(config) if config is not None else None), n_params=n_params,
        accepts=accepts(model), pad_token_id=config_pad_id(config) if config is not None else 0,
        initializer_range=getattr(model, "initializer_range", None)
        or getattr(config, "initializer_range", None), kind=type(model).__name__)


def _factory_callable(spec: str):
    """Split ``spec`` at its last colon, import the target; returns (the callable, its name)."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise _factory_error(spec, "expected module:callable or path/to/file.py:callable")
    module = _import_target(spec, target)
    fn = getattr(module, attr, None)
    if fn is None:
        raise _factory_error(spec, f"{target} has no attribute {attr!r}")
    if not callable(fn):
        raise _factory_error(spec, f"{attr} is a {type(fn).__name__}, not callable")
    return fn, attr


def _import_target(spec: str, target: str):
    """A ``.py`` path (or anything with a slash) is loaded from its file, else imported by name."""
    if target.endswith(".py") or os.sep in target or "/" in target:
        return _import_file(spec, target)
    return _import_module(spec, target)


def _import_file(spec: str, target: str):
    """Load a module from its file, with its folder on sys.path meanwhile to import its siblings."""
    path = Path(target)
    if not path.is_file():
        raise _factory_error(spec, f"no such file {target}")
    name = "llmfix_factory_" + path.stem
    mod_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    sys.path.insert(0, str(path.resolve().parent))
    try:
        mod_spec.loader.exec_module(module)
    except Exception as err:
        sys.modules.pop(name, None)
        raise _factory_error(spec, f"importing {target} failed: {one_line(err)}") from None
    finally:
        sys.path.remove(str(path.resolve().parent))
    return module


def _import_module(spec: str, target: str):
    """Import a dotted name with the current directory on sys.path, as ``python -m`` would."""
    added = os.getcwd() not in sys.path
    if added:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(target)
    except Exception as err:
        if isinstance(err, ModuleNotFoundError) and err.name and target.startswith(err.name):
            raise _factory_error(spec, f"no module named {target!r}") from None
        raise _factory_error(spec, f"importing {target} failed: {one_line(err)}") from None
    finally:
        if added:
            sys.path.remove(os.getcwd())


def _factory_error(spec: str, problem: str) -> LlmfixError:
    return LlmfixError(f"--model-factory {spec}: {problem}")


def _causality(model, config) -> tuple[bool, bool]:
    """(is_causal, declared): a bool ``model.is_causal``, else what an HF-style config says, else
    causal. ``declared`` False (no ``is_causal`` at all) makes the mask probe say it assumed."""
    declared = getattr(model, "is_causal", None)
    if isinstance(declared, bool):
        return declared, True
    if config is not None and (getattr(config, "architectures", None) or getattr(config, "model_type", None)):
        return config_causal(config), True
    return True, declared is not None


def _embedding_rows(model) -> int | None:
    """The vocabulary size of a model that states none: the rows of its input embedding."""
    import torch

    get = getattr(model, "get_input_embeddings", None)
    emb = get() if callable(get) else next((m for m in model.modules() if isinstance(m, torch.nn.Embedding)), None)
    return getattr(emb, "num_embeddings", None)
