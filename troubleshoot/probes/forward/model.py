"""The one model a command runs: an HF checkpoint folder, or the user's own ``--model-factory``.

The model-running probes (``gradflow``, ``masks``) call ``model_for(ctx)``, which decides once per
command whether a model can and should be run, and keeps the answer in ``ctx.model_request`` so
both probes share one model:

- ``--static`` skips it; a model above the size caps for the device is skipped with a note on how
  to run it anyway (``--forward``); transformers missing for a checkpoint folder is a skip too.
- HF folders load through the Auto classes from local files only (``hf``).
- ``--model-factory module:callable`` or ``path/to/file.py:callable`` imports the user's module
  and calls ``callable()`` with no arguments; it must return an ``nn.Module`` (``factory``).

The factory's model is called as ``model(input_ids=..., attention_mask=..., position_ids=...)``
(only the keywords its ``forward`` accepts; HF convention: mask 1 = attend, 0 = padding) and must
return logits ``[batch, seq, vocab]`` (a tensor, an object with ``.logits``, or a tuple whose
first element is the logits). Nothing is ever written next to the artifacts.

The probes import everything they need from here; the pieces live beside it:

- ``loaded``: ``LoadedModel``, the built model as the probes call it;
- ``hf`` / ``factory``: the two ways to build one;
- ``caps``: the device, the size caps, the seed;
- ``inputs``: ``batch_for``, the user's batch or synthetic tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .caps import SEED, resolve_device
from .factory import build_from_factory
from .hf import build_from_checkpoint
from .inputs import batch_for
from .loaded import LoadedModel

__all__ = ["SEED", "LoadedModel", "ModelRequest", "batch_for", "loaded_model", "model_for"]

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


def loaded_model(ctx, obs):
    """The command's model, or None after adding (once per command) the finding saying why not."""
    req = model_for(ctx)
    if req.model is None:
        req.report_skip(obs)
    return req.model


def model_for(ctx) -> ModelRequest:
    """The one model of this command (kept in ``ctx.model_request``); see the module docstring."""
    if ctx.model_request is None:
        ctx.model_request = _decide(ctx)
    return ctx.model_request


def _decide(ctx) -> ModelRequest:
    """Nothing without a model source; a skip for --static or without torch; else build one."""
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
