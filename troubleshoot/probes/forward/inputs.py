"""The tokens a model-running probe feeds the model: the user's batch when usable, else synthetic.

A real batch shows what the model does on the user's data (its padding, its labels), so the first
``batch`` artifact is used when it can be: read with ``loaders.batch.read`` (``.pt``,
``.safetensors``, token-id ``.jsonl``; ragged records masked past their end) and cut to the caps
of ``caps``. When it cannot be used (no 2-D integer ``input_ids``, token ids outside the
vocabulary, text-only records) the probes run on seeded random tokens and say why.
"""
from __future__ import annotations

from pathlib import Path

from ...errors import LlmfixError
from . import caps
from .loaded import LoadedModel


class _Unusable(Exception):
    """Why the user's batch cannot be fed to the model (the message completes "synthetic tokens (...)")."""


def batch_for(ctx, lm: LoadedModel) -> tuple[dict, str]:
    """The user's batch (cut to MAX_BATCH x MAX_SEQ, CPU_MAX_TOKENS on CPU) if usable, else synthetic.

    Returns the batch and a note saying which it is and why (shown in the summary finding).
    """
    given = ctx.of_kind("batch")
    if not given:
        batch = synthetic_batch(lm)
        return batch, "synthetic tokens ({}x{})".format(*batch["input_ids"].shape)
    try:
        return _given_batch(Path(given[0].path), lm)
    except (LlmfixError, _Unusable) as why:
        return synthetic_batch(lm), f"synthetic tokens ({why})"


def synthetic_batch(lm: LoadedModel, batch: int = caps.SYNTH_BATCH, seq: int = caps.SYNTH_SEQ) -> dict:
    """Random tokens from the model's vocabulary, full mask, labels = inputs (seeded)."""
    import torch

    seq = min(seq, lm.max_positions or seq)
    gen = torch.Generator().manual_seed(caps.SEED)
    ids = torch.randint(0, max(lm.vocab_size, 2), (batch, seq), generator=gen).to(lm.device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def _given_batch(path: Path, lm: LoadedModel) -> tuple[dict, str]:
    """The batch file's first rows x tokens within the caps, with a mask and labels filled in.

    Raises LlmfixError (unreadable file) or _Unusable; only the part that is run is checked
    against the vocabulary.
    """
    import torch

    tensors = _read_batch(path)
    ids = tensors.get("input_ids")
    if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.dim() not in (1, 2):
        raise _Unusable(f"{path.name} has no 2-D integer input_ids")
    ids = ids.reshape(1, -1) if ids.dim() == 1 else ids
    if ids.numel() == 0:
        raise _Unusable(f"{path.name} has empty input_ids")
    full = ids.shape
    rows, cols = _caps_shape(full[1], lm)
    ids, mask, labels = (_cut(t, full, rows, cols)
                         for t in (ids, tensors.get("attention_mask"), tensors.get("labels")))
    if lm.vocab_size and (ids.min() < 0 or ids.max() >= lm.vocab_size):
        raise _Unusable(f"{path.name} holds token ids outside [0, {lm.vocab_size}); see the batch probe")
    if mask is None:
        mask = torch.ones_like(ids)
    note = f"{path.name} ({ids.shape[0]}x{ids.shape[1]} tokens" + (
        f" of {full[0]}x{full[1]}, cut to the caps)" if ids.shape != full else ")")
    if labels is None:
        labels = ids.masked_fill(mask == 0, -100)
    elif not (labels != -100).any():
        labels = ids.clone()  # the batch probe reports this; the model can still be judged
        note += "; its labels have no supervised token, so input_ids serve as targets"
    return ({"input_ids": ids.to(lm.device), "attention_mask": mask.to(lm.device),
             "labels": labels.to(lm.device)}, note)


def _caps_shape(n_tokens: int, lm: LoadedModel) -> tuple[int, int]:
    """Rows x tokens to run: MAX_SEQ tokens (fewer when the model takes fewer positions), MAX_BATCH
    rows, on CPU fewer rows so that rows x tokens stays within CPU_MAX_TOKENS."""
    cols = min(caps.MAX_SEQ, lm.max_positions or caps.MAX_SEQ, n_tokens)
    if lm.device.type != "cpu":
        return caps.MAX_BATCH, cols
    return max(1, min(caps.MAX_BATCH, caps.CPU_MAX_TOKENS // cols)), cols


def _cut(t, full, rows: int, cols: int):
    """The first rows x cols of a tensor laid out like input_ids (same element count), else None."""
    import torch

    ok = isinstance(t, torch.Tensor) and t.numel() == full.numel()
    return t.reshape(full)[:rows, :cols].long() if ok else None


def _read_batch(path: Path) -> dict:
    """input_ids / attention_mask / labels through the batch loader; ragged records masked."""
    from ...loaders.batch import read

    batch = read(path)
    seqs = {k: v for k, v in batch.seqs.items() if k in ("input_ids", "attention_mask", "labels")}
    if "input_ids" in seqs and batch.lengths is not None:
        valid = batch.valid
        mask = seqs.get("attention_mask")
        seqs["attention_mask"] = (mask if mask is not None and mask.shape == valid.shape else 1) * valid.long()
        if "labels" in seqs and seqs["labels"].shape == valid.shape:
            seqs["labels"] = seqs["labels"].masked_fill(~valid, -100)
    return seqs
