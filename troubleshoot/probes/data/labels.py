"""Label, EOS, token-range and repetition checks of the data-batch probe (``batch.py`` runs them).

Also the helpers every data check shares: ``publish`` (facts of several batches combine: any fault
wins, numbers take the max), ``first`` (the first offending row/position) and ``DEFAULTS`` (the
token-check thresholds).

Sample findings::

    batch.pt: row 1, position 21  data.labels.pad_not_ignored  18 padding positions in 3 rows carry a
        real label, e.g. row 1, position 21: label = 0 (the pad id: labels = input_ids.clone() ...)
    batch.pt: row 0, position 23  data.eos.masked  EOS is in the text of 4 rows but never a label in 4
        of them ...; pad id 2 is also EOS, so a collator that sets every pad label to -100 masks EOS too
    tokenizer_config.json         data.eos.id_mismatch  EOS ids disagree: config.json 2; ...
"""
from __future__ import annotations

from typing import Any

from ...loaders.batch import Batch
from ...loaders.tokenizer import Specials, eos_not_stopped
from ...observations import Observations

SOURCE = "probe:batch"
# Thresholds (heuristic, documented in docs/probes-data.md).
DEFAULTS = {
    "inverted_vote": 0.5,        # share of padded rows whose mask is 1 on a constant pad run
    "double_shift_min": 0.9,     # share of supervised labels equal to the NEXT input id
    "double_shift_evidence": 16,  # supervised positions needed before judging the shift
    "repeat_max_period": 13,     # OLMo repeated-sequence filter: period 1..13 ...
    "repeat_min_repeats": 32,    # ... repeated at least 32 times
    "repeat_max_tokens": 1_000_000,
}
GOOD_WHEN_TRUE = {"data.mask.binary", "data.eos.present"}
IGNORE = -100


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


def first(cond) -> tuple[int, int]:
    """(row, position) of the first True of a [rows, T] bool tensor."""
    idx = cond.nonzero()[0]
    return int(idx[0]), int(idx[1])


def supervised(b: Batch, ids, valid):
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


def repeats_in_rows(b: Batch, ids, keep, obs: Observations, options: dict) -> None:
    """OLMo's repeated-sequence filter on token ids: period <= 13 repeated >= 32 times."""
    import torch

    rows, width = ids.shape
    cols = min(width, options["repeat_max_tokens"])  # one row of 3M tokens is cut too
    take = max(1, min(rows, options["repeat_max_tokens"] // max(1, cols)))
    flat = ids[:take, :cols].clone()
    sep = -(1 << 40) - torch.arange(flat.numel()).reshape(flat.shape)
    flat = torch.where(keep[:take, :cols], flat, sep).flatten()
    hits = periodic_runs(flat, options["repeat_max_period"], options["repeat_min_repeats"])
    if take < rows or cols < width:
        obs.find("data.capped", "info", f"repeated-sequence check ran on the first {take} of {rows} rows "
                 f"and {cols} of {width} positions (cap {options['repeat_max_tokens']} tokens)", str(b.path))
    hit_rows = sorted({start // cols for start, _, _ in hits})
    if hit_rows:
        start, period, length = hits[0]
        r, t = divmod(start, cols)
        obs.find("data.tokens.periodic_repeats", "warning",
                 f"{len(hit_rows)} rows hold a token sequence of period <= {options['repeat_max_period']} "
                 f"repeated >= {options['repeat_min_repeats']} times, e.g. {b.loc(r, t)}: period {period}, "
                 f"{length // period} repeats. OLMo masks such instances out of the loss; trained on, they "
                 "teach the model to loop", b.where(r, t), {"rows": len(hit_rows)})
    publish(obs, "data.repeats.rate", round(len(hit_rows) / max(1, take), 4))


def eos_mismatch(spec: Specials, obs: Observations, where: str) -> None:
    """The EOS id the batch itself names (its ``eos_token_id`` key) must be one generation stops on.

    Disagreements among the checkpoint's own files are the config probe's (``config.eos_mismatch``):
    each mismatch is reported once, by the family that owns its files."""
    if "batch" not in spec.eos or len(spec.eos) < 2:
        return
    missing, stops = eos_not_stopped(spec.eos)
    differ = sorted(set(missing) & set(spec.eos["batch"]))
    if differ:
        listing = "; ".join(f"{src} {v[0] if len(v) == 1 else v}" for src, v in spec.eos.items())
        stop_text = f"generation stops only on {stops}" if stops else "no config names the EOS to stop on"
        obs.find("data.eos.id_mismatch", "warning",
                 f"the batch's EOS id {differ} is not one generation stops on: {listing}; {stop_text}, so a model "
                 f"trained to end samples with it may never stop. List every end token in generation_config.json "
                 f"eos_token_id, e.g. {sorted(spec.eos_ids)}", where, {k: list(v) for k, v in spec.eos.items()})
    publish(obs, "data.eos.id_mismatch", bool(differ), where)


def mode(values) -> int | None:
    import torch

    if values.numel() == 0:
        return None
    uniq, counts = torch.unique(values, return_counts=True)
    return int(uniq[counts.argmax()])


def range_check(b: Batch, ids, valid, spec: Specials, obs: Observations, origin: str = "") -> None:
    """Token ids (and labels) must lie in [0, vocab); -100 is the only legal negative label."""
    labels = b.seqs.get("labels")
    vocab = spec.vocab
    bad_ids = valid & ((ids < 0) | (ids >= vocab) if vocab else (ids < 0))
    bad_labels = lab = None
    if labels is not None and not labels.is_floating_point():
        lab = valid & (labels != IGNORE)
        bad_labels = lab & ((labels < 0) | (labels >= vocab) if vocab else (labels < 0))
    found = []
    for name, bad, values, scope in ((b.id_key, bad_ids, ids, valid), ("labels", bad_labels, labels, lab)):
        if bad is None or not bad.any():
            continue
        r, t = first(bad)
        v = int(values[r, t])
        limit = f"[0, {vocab}) ({vocab} = {spec.vocab_source})" if vocab else "[0, vocab)"
        extra = (" CrossEntropyLoss ignores only -100 (ignore_index); other negative labels fail."
                 if name == "labels" and v < 0 else "")
        found.append(name)
        obs.find("data.tokens.out_of_range", "error",
                 f"{origin}{int(bad.sum())} {name} values outside {limit}, e.g. {b.loc(r, t)}: {name} = {v} "
                 f"(min {int(values[scope].min())}, max {int(values[scope].max())}).{extra} On GPU this is a "
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


def periodic_runs(seq, max_period: int = 13, min_repeats: int = 32) -> list[tuple[int, int, int]]:
    """(start, period, length) of every stretch of ``seq`` (1-D long tensor) that repeats a pattern
    of ``period`` <= max_period at least ``min_repeats`` times; smallest period first per stretch.

    Separators between samples must be unique values so that no run crosses them.
    """
    import torch

    hits: list[tuple[int, int, int]] = []
    covered: list[tuple[int, int]] = []
    for p in range(1, max_period + 1):
        if seq.numel() < p * min_repeats:
            break
        eq = seq[p:] == seq[:-p]
        c = eq.long().cumsum(0)
        run = c - torch.where(eq, torch.zeros_like(c), c).cummax(0).values
        end = run > 0
        end[:-1] &= run[1:] == 0
        need = (min_repeats - 1) * p
        for i in (end & (run >= need)).nonzero().flatten().tolist():
            start, length = i - int(run[i]) + 1, int(run[i]) + p
            if not any(s <= start < e for s, e in covered):
                hits.append((start, p, length))
                covered.append((start, start + length))
    return sorted(hits)
