"""The built model as the probes see it, and what both builders use to describe one.

``LoadedModel`` hides where a model came from (an HF folder or the user's ``--model-factory``):
the probes call it with input ids and an optional mask, get logits back, and take a loss from it,
whatever keywords the model's ``forward`` takes and whatever it returns. Building one lives in
``hf`` and ``factory``.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from ...errors import LlmfixError


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


def accepts(module) -> frozenset:
    """The keywords ``module.forward`` takes, plus ``"*"`` when it takes ``**kwargs``: the model
    is only ever passed keywords it accepts, so an HF model and a bare nn.Module both work."""
    params = inspect.signature(module.forward).parameters.values()
    names = {p.name for p in params}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        names.add("*")
    return frozenset(names)


def param_dtype(module):
    """The dtype of the first floating parameter: the dtype the model was stored in."""
    import torch

    return next((p.dtype for p in module.parameters() if p.is_floating_point()), torch.float32)


def one_line(err: BaseException) -> str:
    """The first line of an exception (at most 200 characters), for one-line findings and errors."""
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:200]
