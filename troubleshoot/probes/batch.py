"""Data-batch probe: what the model is actually fed — masks, labels, token ids, EOS.

Runs on every artifact of kind "batch" (``.pt`` / ``.safetensors`` tensors, ``.jsonl`` token ids
or text). When a checkpoint folder is given alongside, its files supply the vocabulary size, the
pad / BOS id and every EOS id (``loaders.tokenizer``); without one the batch's own
``eos_token_id`` / ``pad_token_id`` keys are used, the pad id is inferred from the padding, and the
checks that need a missing id say they were skipped and why. Text records go on to ``text.py``.

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
from typing import Any

from ..loaders import batch as batch_loader
from ..loaders.batch import Batch
from ..loaders.tokenizer import Specials, specials
from ..observations import Observations

SOURCE = "probe:batch"
# Thresholds (heuristic, documented in docs/probes-data.md; override through ctx.options).
DEFAULTS = {
    "inverted_vote": 0.5,        # share of padded rows whose mask is 1 on a constant pad run
    "double_shift_min": 0.9,     # share of supervised labels equal to the NEXT input id
    "double_shift_evidence": 16,  # supervised positions needed before judging the shift
    "repeat_max_period": 13,     # OLMo repeated-sequence filter: period 1..13 ...
    "repeat_min_repeats": 32,    # ... repeated at least 32 times
    "repeat_max_tokens": 2_000_000,
}
GOOD_WHEN_TRUE = {"data.mask.binary", "data.eos.present"}
IGNORE = -100


def run(ctx) -> Observations:
    """Check every batch artifact; facts of several batches are combined (any fault wins)."""
    obs = Observations()
    arts = ctx.of_kind("batch")
    if not arts:
        return obs
    options = {**DEFAULTS, **{k: v for k, v in (ctx.options or {}).items() if k in DEFAULTS}}
    checkpoints = ctx.of_kind("hf-checkpoint")
    folder = Path(checkpoints[0].path) if checkpoints else None
    base = specials(folder) if folder else Specials()
    if isinstance((ctx.options or {}).get("eos_token_id"), (int, list)):
        base.add_eos("--eos-id", ctx.options["eos_token_id"])
    from . import text

    reported: set = set()
    for art in arts:
        b = batch_loader.read(art.path)
        spec = with_batch_meta(base, b)
        _bookkeeping(b, obs)
        if "input_ids" in b.seqs:
            check_tokens(b, spec, obs, options)
        signature = tuple(sorted((k, tuple(v)) for k, v in spec.eos.items()))
        if signature not in reported:  # the checkpoint's own disagreement is reported once
            reported.add(signature)
            eos_mismatch(spec, obs, str(b.path) if "batch" in spec.eos else spec.folder)
        if b.texts:
            text.check(b, spec, obs, folder)
    return obs


def publish(obs: Observations, name: str, value: Any, note: str = "") -> None:
    """Set a fact, combining with an earlier value: any fault wins, numbers take the max."""
    old = obs.facts.get(name)
    if old is not None and old.value is not None:
        if isinstance(value, bool):
            value = (old.value and value) if name in GOOD_WHEN_TRUE else (old.value or value)
            if value == old.value:
                return
        elif isinstance(value, (int, float)):
            if value <= old.value:
                return
        elif value == "none" or old.value not in ("none", None):
            return
    obs.fact(name, value, SOURCE, note)


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


def first(cond) -> tuple[int, int]:
    """(row, position) of the first True of a [rows, T] bool tensor."""
    idx = cond.nonzero()[0]
    return int(idx[0]), int(idx[1])


def check_tokens(b: Batch, spec: Specials, obs: Observations, options: dict | None = None) -> None:
    """All tensor-level checks on one batch, in the order a training step would trip over them."""
    options = {**DEFAULTS, **(options or {})}
    ids = _integer_ids(b, obs)
    valid = b.valid
    _nonfinite(b, obs)
    keep, pad = mask_checks(b, ids, valid, spec, obs, options)
    range_check(b, ids, valid, spec, obs)
    sup, label_ids = _supervised(b, ids, valid)
    if sup is None:
        obs.find("data.labels.skipped", "info", "no labels or loss_mask in the batch: label checks "
                 "skipped (HF models compute no loss without labels; DataCollatorForLanguageModeling "
                 "builds them from input_ids)", str(b.path))
    else:
        label_checks(b, ids, valid, keep, sup, label_ids, obs, options)
    # ragged records are one sample each; rectangular rows without padding may be packed chunks
    eos_checks(b, ids, valid, keep, sup, label_ids, spec, pad, obs, complete_rows=b.lengths is not None)
    double_bos(b, ids, keep, spec, obs)
    from .text import periodic_runs
    repeats_in_rows(b, ids, keep, obs, options, periodic_runs)
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
    pad = _mode(ids[valid & ~keep]) if (valid & ~keep).any() else spec.pad
    padding_side(b, valid, keep, obs)
    publish(obs, "data.mask.missing", False)
    return keep, pad


def _inversion(b: Batch, ids, valid, keep, spec: Specials, obs: Observations, options: dict):
    """Inverted mask: 1 on a constant run of one id (the pad) and 0 on varying text."""
    import torch

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
    if spec.pad is not None:
        inv &= id1 == spec.pad
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
    pad = spec.pad
    if pad is None:  # most common last token, if it forms runs somewhere
        last = ids.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        pad = _mode(last)
    notpad = valid & (ids != pad)
    last_real = torch.where(notpad, idx, -1).max(1).values
    first_real = torch.where(notpad, idx, width).min(1).values
    right = lengths - 1 - last_real
    left = first_real.clamp(max=width) * (first_real < lengths)
    if spec.pad is None and int((right >= 2).sum()) == 0 and int((left >= 2).sum()) == 0:
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
    n_right, n_left, n_other = int(right.sum()), int(left.sum()), int((padded & ~right & ~left).sum())
    side = "none" if not int(padded.sum()) else ("right" if n_right >= n_left else "left")
    if n_right and n_left:
        obs.find("data.padding_side", "info", f"mixed padding: {n_right} rows right-, {n_left} left-padded",
                 str(b.path), {"right": n_right, "left": n_left})
    if n_other:
        r = int((padded & ~right & ~left).nonzero()[0, 0])
        obs.find("data.mask.gaps", "info", f"{n_other} rows have masked positions between attended ones "
                 f"(e.g. {b.loc(r)}): packed samples or a segment mask", b.where(r), n_other)
    publish(obs, "data.padding_side", side)
    return side


def range_check(b: Batch, ids, valid, spec: Specials, obs: Observations, origin: str = "") -> None:
    """Token ids (and labels) must lie in [0, vocab); -100 is the only legal negative label."""
    labels = b.seqs.get("labels")
    vocab = spec.vocab
    bad_ids = valid & ((ids < 0) | (ids >= vocab) if vocab else (ids < 0))
    bad_labels = None
    if labels is not None and not labels.is_floating_point():
        lab = valid & (labels != IGNORE)
        bad_labels = lab & ((labels < 0) | (labels >= vocab) if vocab else (labels < 0))
    found = []
    for name, bad, values in ((b.id_key, bad_ids, ids), ("labels", bad_labels, labels)):
        if bad is None or not bad.any():
            continue
        r, t = first(bad)
        v = int(values[r, t])
        limit = f"[0, {vocab}) ({vocab} = {spec.vocab_source})" if vocab else "[0, vocab)"
        extra = (" CrossEntropyLoss ignores only -100 (ignore_index); other negative labels fail"
                 if name == "labels" and v < 0 else "")
        found.append(name)
        obs.find("data.tokens.out_of_range", "error",
                 f"{origin}{int(bad.sum())} {name} values outside {limit}, e.g. {b.loc(r, t)}: {name} = {v} "
                 f"(min {int(values[valid].min())}, max {int(values[valid].max())}).{extra} On GPU this is a "
                 "device-side assert (srcIndex < srcSelectDimSize), on CPU an IndexError, NaN or garbage "
                 "in other kernels", b.where(r, t), {"tensor": name, "count": int(bad.sum()), "first": [r, t]})
    if found:
        publish(obs, "data.tokens.out_of_range", True, str(b.path))
    elif vocab:
        publish(obs, "data.tokens.out_of_range", False, f"all ids < {vocab} ({spec.vocab_source})")
    else:
        obs.find("data.tokens.range_unchecked", "info",
                 f"{origin}token ids checked only for < 0 (max id {int(ids[valid].max()) if valid.any() else '-'}): "
                 "no vocabulary size known; give the checkpoint folder beside the batch", str(b.path))


def _supervised(b: Batch, ids, valid):
    """(supervised positions, label ids) from labels != -100, else from loss_mask > 0."""
    labels, loss_mask = b.seqs.get("labels"), b.seqs.get("loss_mask")
    sup = None if loss_mask is None else valid & (loss_mask > 0)   # Megatron: labels + loss_mask
    if labels is not None:
        labels = labels.long()
        sup = (valid if sup is None else sup) & (labels != IGNORE)
        return sup, labels
    return sup, (ids if sup is not None else None)


def label_checks(b: Batch, ids, valid, keep, sup, labels, obs: Observations, options: dict) -> None:
    """Padding ignored, at least one target per row and batch, labels not shifted twice."""
    padding = valid & ~keep
    bad = padding & sup
    if bad.any():
        r, t = first(bad)
        value = int(labels[r, t])
        what = " (the pad id: labels = input_ids.clone() without masking)" if value == int(ids[r, t]) else ""
        obs.find("data.labels.pad_not_ignored", "error",
                 f"{int(bad.sum())} padding positions in {int(bad.any(1).sum())} rows carry a real label, "
                 f"e.g. {b.loc(r, t)}: label = {value}{what}; the loss trains the model to predict padding. "
                 "Set labels to -100 where attention_mask == 0", b.where(r, t),
                 {"count": int(bad.sum()), "rows": int(bad.any(1).sum()), "first": [r, t]})
    publish(obs, "data.labels.pad_not_ignored", bool(bad.any()), b.where(*first(bad)) if bad.any() else "")
    per_row = sup.sum(1)
    empty = valid.any(1) & (per_row == 0)
    n_empty, total = int(empty.sum()), int(sup.sum())
    if total == 0:
        obs.find("data.labels.no_target", "error",
                 f"no supervised token in the whole batch ({ids.shape[0]} rows, every label is -100): the "
                 "mean cross-entropy divides by zero and the loss is NaN; check the prompt masking and "
                 "how packing / sequence parallelism splits samples", str(b.path), {"rows": n_empty, "batch": True})
    elif n_empty:
        r = int(empty.nonzero()[0, 0])
        obs.find("data.labels.no_target", "warning",
                 f"{n_empty} of {ids.shape[0]} rows have no supervised token, e.g. {b.loc(r)} (all labels -100): "
                 "a per-sample mean or a micro-batch made of such rows gives a NaN loss; usually a prompt "
                 "longer than max_length truncated the answer away", b.where(r), {"rows": n_empty, "batch": False})
    publish(obs, "data.labels.no_target", n_empty > 0 or total == 0)
    publish(obs, "data.labels.no_target_rows", n_empty)
    publish(obs, "data.labels.no_target_batch", total == 0)
    if b.seqs.get("labels") is not None:
        _double_shift(b, ids, valid, sup, labels, obs, options)


def _double_shift(b: Batch, ids, valid, sup, labels, obs: Observations, options: dict) -> None:
    shifted = sup[:, :-1] & valid[:, 1:]
    n = int(shifted.sum())
    if n < options["double_shift_evidence"]:
        return
    same = float((labels == ids)[sup].float().mean())
    ahead = float((labels[:, :-1] == ids[:, 1:])[shifted].float().mean())
    double = ahead >= options["double_shift_min"] and same <= 0.5
    megatron = b.id_key == "tokens"
    if double:
        r, t = first(shifted)
        obs.find("data.labels.double_shifted", "info" if megatron else "warning",
                 f"labels are already shifted: labels[t] == {b.id_key}[t+1] at {ahead:.0%} of {n} supervised "
                 f"positions (labels == {b.id_key} at {same:.0%}). HF *ForCausalLM models shift labels "
                 "themselves, so the model learns to predict two tokens ahead; pass labels = input_ids. "
                 + ("(Megatron-style 'tokens' batches are pre-shifted by design: fine if your loop does "
                    "not shift again)" if megatron else "Ignore if your training loop does not shift."),
                 b.where(r, t), {"ahead": round(ahead, 4), "same": round(same, 4), "positions": n})
    elif same < 0.5 and ahead < 0.5:
        obs.find("data.labels.unaligned", "info",
                 f"labels match neither input_ids ({same:.0%}) nor input_ids shifted by one ({ahead:.0%}); "
                 "expected for encoder-decoder targets, a bug for a causal LM", str(b.path),
                 {"same": round(same, 4), "ahead": round(ahead, 4)})
    if not (double and megatron):  # pre-shifted by design there: leave the question open
        publish(obs, "data.labels.double_shifted", double)


def eos_checks(b: Batch, ids, valid, keep, sup, labels, spec: Specials, pad, obs: Observations,
               complete_rows: bool = False, origin: str = "") -> None:
    """Every sample should contain EOS, and EOS should be a supervised label (seed 003)."""
    import torch

    if not spec.eos_ids:
        obs.find("data.eos.skipped", "info",
                 f"{origin}EOS checks skipped: no EOS id known (give the checkpoint folder with config.json / "
                 "tokenizer files beside the batch, or store eos_token_id in the batch)", str(b.path))
        return
    eos = torch.tensor(sorted(spec.eos_ids))
    at_eos = torch.isin(ids, eos) & keep
    has = at_eos.any(1)
    rows = valid.any(1)
    padded = rows & (keep.sum(1) < valid.sum(1))
    complete = rows if complete_rows else padded
    missing = (complete & ~has) if has.any() else rows
    n_missing = int(missing.sum())
    eos_text = ", ".join(str(i) for i in sorted(spec.eos_ids))
    if n_missing:
        r = int(missing.nonzero()[0, 0])
        obs.find("data.eos.present", "warning",
                 f"{origin}{n_missing} of {int(rows.sum())} samples never contain EOS ({eos_text}), e.g. "
                 f"{b.loc(r)}; a model that never sees EOS never learns to stop and repeats itself. "
                 "Append eos_token to every sample (Llama / Mistral tokenizers do not add it)"
                 + ("" if complete_rows else "; ignore for packed pre-training chunks cut mid-document"),
                 b.where(r), {"rows": n_missing, "eos_ids": sorted(spec.eos_ids)})
    publish(obs, "data.eos.present", n_missing == 0)
    if sup is None or labels is None or not (has & sup.any(1)).any():
        return
    learned = (torch.isin(labels, eos) & sup).any(1)
    masked = has & ~learned & sup.any(1)  # rows with no target at all are data.labels.no_target
    n_masked, n_has = int(masked.sum()), int((has & sup.any(1)).sum())
    if n_masked:
        r, t = first(at_eos & masked.unsqueeze(1))
        cause = (f"; pad id {pad} is also EOS, so a collator that sets every pad label to -100 masks EOS too"
                 if pad is not None and pad in spec.eos_ids else "")
        obs.find("data.eos.masked", "error" if n_masked == n_has else "warning",
                 f"{origin}EOS is in the text of {n_has} rows but never a label in {n_masked} of them, e.g. "
                 f"{b.loc(r, t)}: label = -100{cause}. The model never learns to stop; give the tokenizer "
                 "a pad token distinct from EOS, or build labels from attention_mask", b.where(r, t),
                 {"rows": n_masked, "rows_with_eos": n_has})
    publish(obs, "data.eos.masked", n_masked > 0)


def double_bos(b: Batch, ids, keep, spec: Specials, obs: Observations, origin: str = "") -> None:
    """Two BOS at the start: chat template rendered as text, then tokenised with special tokens."""
    import torch

    if spec.bos is None or ids.shape[1] < 2:
        return
    width = ids.shape[1]
    start = torch.where(keep, torch.arange(width).unsqueeze(0), width).min(1).values.clamp(max=width - 2)
    a = ids.gather(1, start.unsqueeze(1)).squeeze(1)
    c = ids.gather(1, (start + 1).unsqueeze(1)).squeeze(1)
    bad = keep.any(1) & (a == spec.bos) & (c == spec.bos)
    if bad.any():
        r = int(bad.nonzero()[0, 0])
        obs.find("data.tokens.double_bos", "warning",
                 f"{origin}{int(bad.sum())} rows start with BOS twice (id {spec.bos}), e.g. {b.loc(r)}: "
                 "apply_chat_template(tokenize=False) followed by a tokenizer call that adds BOS again; "
                 "tokenise with add_special_tokens=False", b.where(r), int(bad.sum()))
    publish(obs, "data.tokens.double_bos", bool(bad.any()))


def repeats_in_rows(b: Batch, ids, keep, obs: Observations, options: dict, periodic_runs) -> None:
    """OLMo's repeated-sequence filter on token ids: period <= 13 repeated >= 32 times."""
    import torch

    rows, width = ids.shape
    take = max(1, min(rows, options["repeat_max_tokens"] // max(1, width)))
    flat = ids[:take].clone()
    sep = -(1 << 40) - torch.arange(flat.numel()).reshape(flat.shape)
    flat = torch.where(keep[:take], flat, sep).flatten()
    hits = periodic_runs(flat, options["repeat_max_period"], options["repeat_min_repeats"])
    if take < rows:
        obs.find("data.capped", "info", f"repeated-sequence check ran on the first {take} of {rows} rows "
                 f"(cap {options['repeat_max_tokens']} tokens)", str(b.path))
    hit_rows = sorted({start // width for start, _, _ in hits})
    if hit_rows:
        start, period, length = hits[0]
        r, t = divmod(start, width)
        obs.find("data.tokens.periodic_repeats", "warning",
                 f"{len(hit_rows)} rows hold a token sequence of period <= {options['repeat_max_period']} "
                 f"repeated >= {options['repeat_min_repeats']} times, e.g. {b.loc(r, t)}: period {period}, "
                 f"{length // period} repeats. OLMo masks such instances out of the loss; trained on, they "
                 "teach the model to loop", b.where(r, t), {"rows": len(hit_rows)})
    publish(obs, "data.repeats.rate", round(len(hit_rows) / max(1, take), 4))


def eos_mismatch(spec: Specials, obs: Observations, where: str) -> None:
    """Every EOS id named anywhere must stop generation (generation_config, else config.json)."""
    if len(spec.eos) < 2:
        return
    union = spec.eos_ids
    stops = spec.eos.get("generation_config.json") or spec.eos.get("config.json")
    missing = sorted(union - set(stops)) if stops else []
    differ = missing or (stops is None and len({tuple(sorted(v)) for v in spec.eos.values()}) > 1)
    if differ:
        listing = "; ".join(f"{src} {v[0] if len(v) == 1 else v}" for src, v in spec.eos.items())
        stop_text = f"generation stops only on {sorted(stops)}" if stops else "no config names the EOS to stop on"
        obs.find("data.eos.id_mismatch", "warning",
                 f"EOS ids disagree: {listing}; {stop_text}, so a model trained to end samples with "
                 f"{missing or sorted(union)} may never stop. List every end token in generation_config.json "
                 f"eos_token_id, e.g. {sorted(union)}", where, {k: list(v) for k, v in spec.eos.items()})
    publish(obs, "data.eos.id_mismatch", bool(differ), where)


def _mode(values) -> int | None:
    import torch

    if values.numel() == 0:
        return None
    uniq, counts = torch.unique(values, return_counts=True)
    return int(uniq[counts.argmax()])


def _fmt(values: list[float]) -> str:
    return ", ".join(str(int(v)) if abs(v) < 1e15 and v == int(v) else f"{v:g}" for v in values)
