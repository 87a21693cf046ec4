"""Data-batch probe: what the model is actually fed — masks, labels, token ids, EOS.

Runs on every artifact of kind "batch" (``.pt`` / ``.safetensors`` tensors, ``.jsonl`` token ids
or text). When a checkpoint folder is given alongside, its files supply the vocabulary size, the
pad / BOS id and every EOS id (``loaders.tokenizer``); without one the batch's own
``eos_token_id`` / ``pad_token_id`` keys are used, the pad id is inferred from the padding, and the
checks that need a missing id say they were skipped and why. Text records go on to ``text.py``; the label, EOS and range checks live in ``labels.py``.

Sample findings (``where  id  message``)::

    batch.pt: row 3, position 17  data.mask.non_binary     12 attention_mask values are not 0/1
        (values 2, 3) ... row 3, position 17: attention_mask = 2. HF models expect 1 = attend, 0 = masked.
    batch.pt: row 0               data.mask.inverted       attention_mask looks inverted: in 7 of 8
        padded rows it is 1 only on a run of id 0 (pad) and 0 on the text ...
    batch.pt: row 1, position 9   data.labels.pad_not_ignored  40 padding positions carry a label ...
    batch.pt                      data.labels.no_target    no supervised token in the whole batch ...

How to read them: an ``error`` breaks training outright (NaN loss, device-side assert, a model
trained on padding); a ``warning`` is very likely a bug but has legitimate uses (pre-shifted labels
in Megatron-style loops, rows without EOS in packed pre-training chunks); ``info`` says what was
checked, what was skipped and which caps applied. Each finding's ``value`` holds the counts.
"""
from __future__ import annotations

from copy import deepcopy
from pathlib import Path

from ...loaders import batch as batch_loader
from ...loaders.batch import Batch
from ...loaders.tokenizer import Specials, specials
from ...observations import Observations
from . import text
from .labels import (DEFAULTS, IGNORE, double_bos, eos_checks, eos_mismatch, first, label_checks, mode, publish,
                     range_check, repeats_in_rows, supervised)


# Every fact this family can publish (kb lint checks them against the rules' facts).
PUBLISHES = (
    "data.mask.binary", "data.mask.missing", "data.mask.inverted", "data.mask.all_zero_rows",
    "data.padding_side", "data.has_nonfinite", "data.tokens.out_of_range", "data.tokens.double_bos",
    "data.labels.pad_not_ignored", "data.labels.no_target", "data.labels.no_target_rows",
    "data.labels.no_target_batch", "data.labels.double_shifted", "data.eos.present", "data.eos.masked",
    "data.eos.id_mismatch", "data.repeats.rate", "data.text.escape_rate", "data.text.entity_rate",
    "data.text.mojibake_rate", "data.text.duplicate_rate", "data.text.short_rate",
)

def run(ctx) -> Observations:
    """Check every batch artifact; facts of several batches are combined (any fault wins)."""
    obs = Observations()
    arts = ctx.of_kind("batch")
    if not arts:
        return obs
    checkpoints = ctx.of_kind("hf-checkpoint")
    folder = Path(checkpoints[0].path) if checkpoints else None
    base = specials(folder) if folder else Specials()
    for art in arts:
        b = batch_loader.read(art.path)
        spec = with_batch_meta(base, b)
        _bookkeeping(b, obs)
        if "input_ids" in b.seqs:
            check_tokens(b, spec, obs)
        eos_mismatch(spec, obs, str(b.path))
        if b.texts:
            text.check(b, spec, obs, folder)
    return obs


def with_batch_meta(base: Specials, b: Batch) -> Specials:
    """The checkpoint's special ids plus what the batch itself says (its eos_token_id key...)."""
    spec = deepcopy(base)
    if "eos_token_id" in b.meta:
        spec.add_eos("batch", b.meta["eos_token_id"])
    if spec.pad is None and isinstance(b.meta.get("pad_token_id"), int):
        spec.pad, spec.pad_source = b.meta["pad_token_id"], "batch"
    if spec.bos is None and isinstance(b.meta.get("bos_token_id"), int):
        spec.bos = b.meta["bos_token_id"]
    if spec.vocab is None and isinstance(b.meta.get("vocab_size"), int):
        spec.vocab, spec.vocab_source = b.meta["vocab_size"], "batch vocab_size"
    return spec


def _bookkeeping(b: Batch, obs: Observations) -> None:
    for note in b.notes:
        obs.find("data.capped", "info", f"{note}; the rest of the file was not checked", str(b.path))
    for problem in b.problems:
        obs.find("data.batch.inconsistent", "warning", problem, str(b.path))


def check_tokens(b: Batch, spec: Specials, obs: Observations) -> None:
    """All tensor-level checks on one batch, in the order a training step would trip over them."""
    options = DEFAULTS
    ids = _integer_ids(b, obs)
    valid = b.valid
    _nonfinite(b, obs)
    keep, pad = mask_checks(b, ids, valid, spec, obs, options)
    range_check(b, ids, valid, spec, obs)
    sup, label_ids = supervised(b, ids, valid)
    if sup is None:
        obs.find("data.labels.skipped", "info", "no labels or loss_mask in the batch: label checks "
                 "skipped (HF models compute no loss without labels; DataCollatorForLanguageModeling "
                 "builds them from input_ids)", str(b.path))
    else:
        label_checks(b, ids, valid, keep, sup, label_ids, obs, options)
    # ragged records are one sample each; rectangular rows without padding may be packed chunks
    eos_checks(b, ids, valid, keep, sup, label_ids, spec, pad, obs, complete_rows=b.lengths is not None)
    double_bos(b, ids, keep, spec, obs)
    repeats_in_rows(b, ids, keep, obs, options)
    rows, width = ids.shape
    summary = (f"{rows} rows x {width} tokens, {int(keep.sum())} attended tokens"
               + (f", {int(sup.sum())} supervised labels" if sup is not None else "")
               + (f", pad id {pad}" if pad is not None else "")
               + (f", EOS {sorted(spec.eos_ids)}" if spec.eos_ids else ", EOS unknown")
               + (f", vocab {spec.vocab} ({spec.vocab_source})" if spec.vocab else ", vocab unknown"))
    obs.find("data.batch.summary", "info", summary, str(b.path),
             {"rows": rows, "width": width, "pad_id": pad, "eos_ids": sorted(spec.eos_ids),
              "vocab": spec.vocab})


def _integer_ids(b: Batch, obs: Observations):
    import torch

    ids = b.seqs["input_ids"]
    if not ids.is_floating_point():
        return ids.long()
    frac = b.valid & torch.isfinite(ids) & (ids != ids.round())
    if frac.any():
        r, t = first(frac)
        obs.find("data.tokens.out_of_range", "error",
                 f"{b.id_key} is a float tensor with {int(frac.sum())} non-integer values, e.g. "
                 f"{b.loc(r, t)}: {float(ids[r, t])}; token ids must be integers", b.where(r, t))
        publish(obs, "data.tokens.out_of_range", True, b.where(r, t))
    return torch.nan_to_num(ids, nan=0.0).long()


def _nonfinite(b: Batch, obs: Observations) -> None:
    """NaN / Inf in any float tensor (an additive mask's -inf is left to the mask check)."""
    import torch

    found = False
    tensors = [(n, t, True) for n, t in b.seqs.items()] + [(n, t, False) for n, t in b.other.items()]
    for name, t, is_seq in tensors:
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            continue
        bad = ~torch.isfinite(t)
        if name == "attention_mask" or "mask" in name:
            bad = torch.isnan(t) | (t == float("inf"))
        if is_seq:
            bad &= b.valid
        n = int(bad.sum())
        if n:
            found = True
            idx = [int(i) for i in bad.nonzero()[0]]
            at = b.where(idx[0], idx[1]) if is_seq and len(idx) == 2 else f"{b.path}: {name}{idx}"
            value = float(t[tuple(idx)])
            obs.find("data.has_nonfinite", "error",
                     f"{name} holds {n} non-finite values (NaN/Inf), e.g. {name}{idx} = {value}; one "
                     "NaN input makes the loss and every gradient NaN", at,
                     {"tensor": name, "count": n, "first": idx})
    publish(obs, "data.has_nonfinite", found, str(b.path))


def mask_checks(b: Batch, ids, valid, spec: Specials, obs: Observations, options: dict):
    """Validate attention_mask; return (keep, pad): [rows, T] bool of real tokens, and the pad id."""
    import torch

    mask = b.seqs.get("attention_mask")
    where = str(b.path)
    if mask is None and "attention_mask" in b.other:
        shape = tuple(b.other["attention_mask"].shape)
        obs.find("data.mask.not_2d", "info", f"attention_mask has shape {shape}: only 2-D [batch, seq] "
                 "padding masks are checked here (a forward pass checks the rest)", str(b.path))
        keep, pad = _no_mask(b, ids, valid, spec, Observations())
        padding_side(b, valid, keep, obs)
        return keep, pad
    if mask is None:
        return _no_mask(b, ids, valid, spec, obs)
    additive = non_binary = False
    if mask.dtype != torch.bool:
        bad = valid & ~((mask == 0) | (mask == 1)) & ~torch.isnan(mask.float())
        n = int(bad.sum())
        non_binary = n > 0
        if n:
            values = sorted({float(v) for v in torch.unique(mask[bad])[:6]})
            inside = mask[valid].float()
            additive = bool(inside.max() <= 0) and bool(inside.min() < 0)
            hint = ("it looks like an additive mask (0 = attend, large negative = masked); pass the "
                    "1/0 mask and let the model build the additive one" if additive else
                    "integer values above 1 look like document ids of packed samples; HF models expect 0/1 "
                    "unless patched for packing" if all(v == int(v) and v > 1 for v in values) else
                    "fractional values come from averaging, interpolating or casting a mask")
            r, t = first(bad)
            obs.find("data.mask.non_binary", "error",
                     f"{n} attention_mask values are not 0/1 (values {_fmt(values)}): {hint}; e.g. "
                     f"{b.loc(r, t)}: attention_mask = {_fmt([float(mask[r, t])])}. HF models expect "
                     "1 = attend, 0 = masked; other values scale or flip the attention", b.where(r, t),
                     {"count": n, "values": values, "first": [r, t]})
            where = b.where(r, t)
    publish(obs, "data.mask.binary", not non_binary, where)
    keep = valid & ((mask == 0) if additive else (mask > 0))
    zero = valid.any(1) & ~keep.any(1)
    n_zero = int(zero.sum())
    if n_zero:
        r = int(zero.nonzero()[0, 0])
        obs.find("data.mask.all_zero_rows", "error" if n_zero == ids.shape[0] else "warning",
                 f"{n_zero} of {ids.shape[0]} rows have an all-zero attention_mask, e.g. {b.loc(r)}: no "
                 "token may attend anywhere; softmax over a fully masked row gives NaN in many kernels",
                 b.where(r), n_zero)
    publish(obs, "data.mask.all_zero_rows", n_zero, b.where(int(zero.nonzero()[0, 0])) if n_zero else "")
    keep = _inversion(b, ids, valid, keep, spec, obs, options)
    pad = mode(ids[valid & ~keep]) if (valid & ~keep).any() else spec.pad
    padding_side(b, valid, keep, obs)
    publish(obs, "data.mask.missing", False)
    return keep, pad


def _inversion(b: Batch, ids, valid, keep, spec: Specials, obs: Observations, options: dict):
    """Inverted mask: 1 on a constant run of one id (the pad) and 0 on varying text."""
    big = 1 << 62
    region0, region1 = valid & ~keep, keep
    n0, n1 = region0.sum(1), region1.sum(1)
    mixed = (n0 > 0) & (n1 > 0)

    def constant(region):
        lo = ids.masked_fill(~region, big).min(1).values
        hi = ids.masked_fill(~region, -big).max(1).values
        return lo == hi, lo

    c0, _ = constant(region0)
    c1, id1 = constant(region1)
    inv = mixed & c1 & ~c0 & (n1 >= 2)
    normal = mixed & c0 & ~c1
    n_inv, n_mixed = int(inv.sum()), int(mixed.sum())
    inverted = n_inv > int(normal.sum()) and n_inv >= options["inverted_vote"] * n_mixed and n_inv > 0
    if not inverted:
        if n_mixed:
            publish(obs, "data.mask.inverted", False)
        return keep
    r = int(inv.nonzero()[0, 0])
    pad_id = int(id1[r])
    known = f" (the pad token of {spec.pad_source})" if spec.pad == pad_id and spec.pad_source else ""
    kept = keep[r].nonzero().flatten()
    obs.find("data.mask.inverted", "error",
             f"attention_mask looks inverted (1 = padding, 0 = text): in {n_inv} of {n_mixed} padded rows "
             f"it is 1 only on a run of id {pad_id}{known} and 0 on the varying text; e.g. {b.loc(r)}: 1 on "
             f"positions {int(kept[0])}-{int(kept[-1])}. HF models expect 1 = attend; the model trains "
             "on padding. The other checks below use the flipped mask", b.where(r),
             {"rows": n_inv, "padded_rows": n_mixed, "pad_id": pad_id})
    publish(obs, "data.mask.inverted", True, b.where(r))
    return valid & ~keep


def _no_mask(b: Batch, ids, valid, spec: Specials, obs: Observations):
    """No attention_mask: find padding as runs of the pad id at row ends."""
    import torch

    width = ids.shape[1]
    idx = torch.arange(width).unsqueeze(0)
    lengths = valid.sum(1)
    last = ids.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    # the tokenizer's pad id if the rows end (or start) with it; else the most common last (right
    # padding) or first (left padding) token, if it forms runs of two or more somewhere
    for pad in dict.fromkeys(c for c in (spec.pad, mode(last), mode(ids[:, 0])) if c is not None):
        notpad = valid & (ids != pad)
        last_real = torch.where(notpad, idx, -1).max(1).values
        first_real = torch.where(notpad, idx, width).min(1).values
        right = lengths - 1 - last_real
        left = first_real * (first_real < lengths)
        runs = int((right >= 2).sum()) + int((left >= 2).sum())
        if runs or (pad == spec.pad and int((right > 0).sum()) + int((left > 0).sum())):
            break
    else:
        pad = None
    if pad is None or (int((right > 0).sum()) == 0 and int((left > 0).sum()) == 0):
        publish(obs, "data.mask.missing", False)
        publish(obs, "data.padding_side", "none")
        return valid, spec.pad
    side = "right" if int((right > 0).sum()) >= int((left > 0).sum()) else "left"
    start = last_real + (2 if pad in spec.eos_ids else 1)  # pad == eos: the first one is the real EOS
    padding = valid & ((idx >= start.unsqueeze(1)) if side == "right" else (idx < first_real.unsqueeze(1)))
    keep = valid & ~padding
    r = int(padding.any(1).nonzero()[0, 0]) if padding.any() else 0
    obs.find("data.mask.missing", "warning" if side == "left" else "info",
             f"no attention_mask, but {int(padding.any(1).sum())} rows are {side}-padded with id {pad}: "
             + ("real tokens attend to the leading pads and their positions shift; pass attention_mask"
                if side == "left" else "pads are attended only by later pads; fine if their labels are "
                "-100, but pass attention_mask to be safe"), b.where(r), {"pad_id": pad, "side": side})
    publish(obs, "data.mask.missing", True, b.where(r))
    publish(obs, "data.padding_side", side)
    return keep, pad


def padding_side(b: Batch, valid, keep, obs: Observations) -> str:
    """left / right / none from where the kept tokens sit inside each row."""
    import torch

    width = keep.shape[1]
    idx = torch.arange(width).unsqueeze(0)
    lengths, count = valid.sum(1), keep.sum(1)
    padded = count < lengths
    first_k = torch.where(keep, idx, width).min(1).values
    last_k = torch.where(keep, idx, -1).max(1).values
    right = padded & (count > 0) & (first_k == 0) & (last_k == count - 1)
    left = padded & (count > 0) & (last_k == lengths - 1) & (first_k == lengths - count)
    other = padded & (count > 0) & ~right & ~left   # all-zero rows are reported on their own
    n_right, n_left, n_other = int(right.sum()), int(left.sum()), int(other.sum())
    side = "none" if not int(padded.sum()) else ("right" if n_right >= n_left else "left")
    if n_right and n_left:
        obs.find("data.padding_side", "info", f"mixed padding: {n_right} rows right-, {n_left} left-padded",
                 str(b.path), {"right": n_right, "left": n_left})
    if n_other:
        r = int(other.nonzero()[0, 0])
        obs.find("data.mask.gaps", "info", f"{n_other} rows have masked positions between attended ones "
                 f"(e.g. {b.loc(r)}): packed samples or a segment mask", b.where(r), n_other)
    publish(obs, "data.padding_side", side)
    return side


def _fmt(values: list[float]) -> str:
    return ", ".join(str(int(v)) if abs(v) < 1e15 and v == int(v) else f"{v:g}" for v in values)
