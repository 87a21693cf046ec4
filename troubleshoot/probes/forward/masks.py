"""Mask invariants: does the model really respect causality and its attention mask?

Why: custom attention that drops ``attention_mask``, a bidirectional mask in a causal LM, a 0/1
convention flipped between collator and model, position ids not derived from the mask - none of
these crash; the loss is just too low (the model peeks at the future) or strange. A handful of
forward passes on seeded synthetic tokens (no user data) test invariants every correct model keeps:

- causal: changing tokens at positions >= p leaves the logits at positions < p unchanged; on a
  leak, hooks name the first module whose output leaks (skipped for bidirectional models).
- padding: a sequence padded right and left (position ids from the mask), with two different pad
  contents, gives the logits of the sequence alone on its real tokens. If pad contents matter,
  the mask is not applied - unless feeding the inverted mask (1 - mask) makes them irrelevant:
  then the model uses the opposite convention.
- position ids / batch rows: the same input in another batch row gives the same logits; the
  result does not depend on padding length when position ids come from the mask.
- fully masked rows: an all-zero mask row must not put NaN into other rows; NaN in its own row
  is the SDPA pitfall (softmax over no visible key) and still poisons the gradients.

Each finding carries the measured max deviation and the tolerance (relative to the largest
reference logit: RTOL per dtype). Sample::

    tests/modelfactory.py:leaky_lm  error  forward.mask.causal_leak  the model sees the future:
        changing tokens from position 12 on changes the logits at positions < 12 (first at
        position 0, max deviation 0.00468 > tolerance 3.66e-06); first leaking module: blocks.0.attn
"""
from __future__ import annotations

from ...errors import LlmfixError
from .model import SEED, LoadedModel, loaded_model
from ...observations import Observations
from .nonfinite import float_tensors

SOURCE = "probe:masks"
# Every fact this family can publish (kb lint checks them against the rules' facts).
PUBLISHES = (
    "forward.mask.causal_leak", "forward.mask.ignored", "forward.mask.inverted",
    "forward.mask.fully_masked_nan", "forward.position_ids_dependent",
)
SEQ, PAD = 24, 8      # real tokens per test sequence, padding tokens added (cut to max positions)
# Tolerance = RTOL[dtype] x the largest |reference output|. Outputs computed with different batch
# shapes (alone vs in a batch) differ by kernel rounding: measured up to ~2e-3 relative in bf16 on
# CPU for tiny HF models; GPU kernels differ more. Rows of one batch share every kernel, so
# comparisons inside one batch (causal, pad contents) use SAME_BATCH x the tolerance.
RTOL = {"torch.float32": 1e-4, "torch.float64": 1e-7, "torch.bfloat16": 5e-2, "torch.float16": 1e-2}
SAME_BATCH = 0.1
ATOL = 1e-6           # floor for the tolerance, for outputs that are all ~0


def run(ctx) -> Observations:
    obs = Observations()
    lm = loaded_model(ctx, obs)
    if lm is None:
        return obs
    length = min(SEQ, (lm.max_positions or SEQ + PAD) - PAD)
    if length < 4 or lm.vocab_size < 2:
        obs.find("forward.mask.skipped", "info", "mask tests skipped: the model takes too few "
                 "positions or has no vocabulary", lm.where)
        return obs
    import torch

    gen = torch.Generator().manual_seed(SEED)
    x, z = (torch.randint(0, lm.vocab_size, (n,), generator=gen) for n in (length, length + PAD))
    tests = [("causal", _causal), ("padding", _padding), ("fully-masked", _fully_masked)]
    with torch.no_grad():
        try:
            alone = _fwd(lm, x[None], torch.ones(1, length, dtype=torch.long))[0]
        except LlmfixError:
            raise
        except Exception as err:  # the user's model may raise anything; report, do not crash
            obs.find("forward.error", "warning", f"the model raised {type(err).__name__} on a plain "
                     f"sequence, mask tests skipped: {_line(err)}", lm.where)
            return obs
        if not bool(alone.isfinite().all()):
            obs.find("forward.mask.skipped", "info", "mask tests skipped: the output is already NaN/Inf "
                     "for a plain unpadded sequence (see forward.first_nonfinite_module)", lm.where)
            return obs
        for label, test in tests:
            try:
                test(lm, x, z, alone, gen, obs)
            except LlmfixError:
                raise
            except Exception as err:  # the user's model may raise anything; report, do not crash
                obs.find("forward.error", "warning", f"the model raised {type(err).__name__} in the "
                         f"{label} mask test: {_line(err)}", lm.where)
    return obs


def _fwd(lm: LoadedModel, ids, mask, pos=None):
    """Outputs in fp32; position ids from the mask (cumsum - 1, pads at 1) unless given."""
    if pos is None:
        pos = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    dev = lm.device
    return lm(ids.to(dev), mask.to(dev), pos.to(dev)).float().cpu()


def tolerance(lm: LoadedModel, ref, same_batch: bool = False) -> float:
    finite = ref[ref.isfinite()]
    scale = float(finite.abs().max()) if finite.numel() else 0.0
    return max(RTOL.get(str(lm.dtype), 1e-4) * scale * (SAME_BATCH if same_batch else 1.0), ATOL)


def deviation(a, b) -> float:
    """Max |a - b|; inf when either side holds NaN/Inf (a NaN never counts as "unchanged")."""
    d = (a - b).abs()
    return float("inf") if not bool(d.isfinite().all()) else float(d.max()) if d.numel() else 0.0


def _causal(lm: LoadedModel, x, z, alone, gen, obs: Observations) -> None:
    import torch

    if not lm.is_causal:
        obs.find("forward.mask.causal", "info", f"causal test skipped: {lm.kind or 'the model'} is "
                 "bidirectional (an encoder may look ahead)", lm.where)
        return
    n, p = len(x), len(x) // 2
    changed = x.clone()
    changed[p:] = (x[p:] + torch.randint(1, lm.vocab_size, (n - p,), generator=gen)) % lm.vocab_size
    ids, mask = torch.stack([x, changed]), torch.ones(2, n, dtype=torch.long)
    out = _fwd(lm, ids, mask)
    tol = tolerance(lm, out[0, :p], same_batch=True)
    per_pos = (out[0, :p] - out[1, :p]).abs().flatten(1).amax(-1).nan_to_num(float("inf"))
    dev = float(per_pos.max())
    value = {"max_deviation": dev, "tolerance": tol, "changed_from": p}
    if dev <= tol:
        obs.fact("forward.mask.causal_leak", False, SOURCE, f"max deviation {dev:.3g} <= {tol:.3g}")
        obs.find("forward.mask.causal", "info", f"no causal leak: changing tokens from position {p} on "
                 f"leaves earlier logits unchanged (max deviation {dev:.3g} <= tolerance {tol:.3g})",
                 lm.where, value)
        return
    first = int((per_pos > tol).nonzero()[0, 0])
    module = _first_leaking_module(lm, ids, mask, p)
    value |= {"first_position": first, "first_module": module}
    assumed = "" if lm.causal_declared else (" (the model was assumed causal; set `model.is_causal = "
                                             "False` on a bidirectional encoder)")
    obs.fact("forward.mask.causal_leak", True, SOURCE, f"first at position {first}, module {module}")
    obs.find("forward.mask.causal_leak", "error", f"the model sees the future: changing tokens from "
             f"position {p} on changes the logits at positions < {p} (first at position {first}, max "
             f"deviation {dev:.3g} > tolerance {tol:.3g}); first leaking module: {module}{assumed}",
             f"{lm.where}: {module}", value)


def _first_leaking_module(lm: LoadedModel, ids, mask, p: int) -> str:
    """Re-run with hooks: the first module (execution order) whose output at < p differs by row.

    When that module's input already leaks (a Linear after the attention arithmetic), the leak
    comes from the code of its parent, which is named instead.
    """
    names = {m: (n or "(model)") for n, m in lm.module.named_modules()}
    seen: list = []

    def leaks(tensors) -> bool:
        for t in tensors:
            if t.dim() >= 2 and t.shape[0] == 2 and t.shape[1] == ids.shape[1]:
                a, b = t[0, :p].detach().float().cpu(), t[1, :p].detach().float().cpu()
                return deviation(a, b) > tolerance(lm, a, same_batch=True)
        return False

    def hook(module, args, out) -> None:
        if not seen and leaks(float_tensors(out)):
            name = names.get(module, "?")
            seen.append(name.rsplit(".", 1)[0] if "." in name and leaks(float_tensors(list(args))) else name)

    handles = [m.register_forward_hook(hook) for m in names]
    try:
        _fwd(lm, ids, mask)
    finally:
        for h in handles:
            h.remove()
    return seen[0] if seen else "(not localised)"


def _pad(x, fill, side: str, pad: int):
    import torch

    mask = torch.cat([torch.ones(len(x), dtype=torch.long), torch.zeros(pad, dtype=torch.long)])
    ids = torch.cat([x, fill])
    return (ids, mask) if side == "right" else (ids.roll(pad), mask.roll(pad))


def _padding(lm: LoadedModel, x, z, alone, gen, obs: Observations) -> None:
    import torch

    if not lm.takes("attention_mask"):
        obs.find("forward.mask.padding", "info", "padding tests skipped: the model's forward() takes "
                 "no attention_mask", lm.where)
        return
    n, pad = len(x), PAD
    fill_a = torch.full((pad,), lm.pad_token_id, dtype=torch.long)
    fill_b = torch.randint(0, lm.vocab_size, (pad,), generator=gen)
    rows = [_pad(x, fill_a, "right", pad), _pad(x, fill_b, "right", pad),
            _pad(x, fill_a, "left", pad), _pad(x, fill_b, "left", pad),
            (z, torch.ones(n + pad, dtype=torch.long))]
    ids, mask = torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])
    out = _fwd(lm, ids, mask)
    real = [out[0, :n], out[1, :n], out[2, pad:], out[3, pad:]]
    tol, same = tolerance(lm, alone), tolerance(lm, alone, same_batch=True)
    pad_dev = max(deviation(real[0], real[1]), deviation(real[2], real[3]))
    devs = {"pad_content": pad_dev, "right_vs_alone": deviation(real[0], alone),
            "left_vs_alone": deviation(real[2], alone),
            "other_row": deviation(_fwd(lm, torch.stack([z[:n], x]), torch.ones(2, n, dtype=torch.long))[1], alone)}
    value = {"max_deviation": devs, "tolerance": tol, "tolerance_same_batch": same}
    if any(not bool(r.isfinite().all()) for r in real):
        obs.fact("forward.mask.fully_masked_nan", True, SOURCE, "padded rows are NaN on real tokens")
        obs.find("forward.mask.fully_masked_nan", "error", "padding makes real tokens NaN: pad query "
                 "rows see no key at all, their NaN output reaches real tokens through 0 x NaN in the "
                 "next layer (fill masks with finfo(dtype).min, not -inf)", lm.where, value)
        return
    if pad_dev > same:
        inv = _fwd(lm, ids, 1 - mask, (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1))
        inv_real = [inv[0, :n], inv[1, :n], inv[2, pad:], inv[3, pad:]]
        inv_dev = max(deviation(inv_real[0], inv_real[1]), deviation(inv_real[2], inv_real[3]))
        effect = max(deviation(a, b) for a, b in zip(real, inv_real))
        value |= {"inverted_pad_content": inv_dev, "inverted_vs_normal": effect}
        inverted = inv_dev <= same
        obs.fact("forward.mask.inverted", inverted, SOURCE, f"pad contents change logits by {pad_dev:.3g}")
        obs.fact("forward.mask.ignored", not inverted, SOURCE, f"with 1 - mask: {inv_dev:.3g}")
        if inverted:
            obs.find("forward.mask.inverted", "error", f"the model uses the opposite mask convention: "
                     f"with mask 1 = token, 0 = padding the pad contents change real-token logits by "
                     f"{pad_dev:.3g} (> tolerance {same:.3g}); with 1 - mask they change them by only "
                     f"{inv_dev:.3g}", lm.where, value)
        else:
            none = " and flipping it changes nothing" if effect <= same else ""
            obs.find("forward.mask.ignored", "error", f"the attention mask is not applied{none}: "
                     f"padding contents change real-token logits by {pad_dev:.3g} (> tolerance "
                     f"{same:.3g}), with the mask as given and inverted ({inv_dev:.3g})", lm.where, value)
    else:
        obs.fact("forward.mask.ignored", False, SOURCE, f"pad contents change logits by {pad_dev:.3g}")
        obs.fact("forward.mask.inverted", False, SOURCE)
        obs.find("forward.mask.padding", "info", f"padding is masked: pad contents change real-token "
                 f"logits by {pad_dev:.3g} (<= tolerance {same:.3g})", lm.where, value)
    _positions(lm, devs, tol, pad_dev <= same, value, obs)


def _positions(lm: LoadedModel, devs: dict, tol: float, masked: bool, value, obs: Observations) -> None:
    row, right, left = devs["other_row"], devs["right_vs_alone"], devs["left_vs_alone"]
    if row > tol:
        sev, msg = "error", (f"the same sequence gives different logits alone and as row 2 of a batch "
                             f"(max deviation {row:.3g} > tolerance {tol:.3g}): rows influence each other")
    elif not masked:
        return  # padding leaks anyway: length effects cannot be told apart
    elif right > tol:
        sev, msg = "warning", (f"real-token logits change with the padded length of the batch (right-"
                               f"padded vs alone: {right:.3g} > tolerance {tol:.3g})")
    elif left > tol:
        how = ("position_ids are passed but ignored" if lm.takes("position_ids") else
               "the model takes no position_ids, so left padding shifts its positions")
        sev, msg = "warning", (f"left padding changes real-token logits by {left:.3g} (> tolerance "
                               f"{tol:.3g}) with position ids derived from the mask: {how}")
    else:
        obs.fact("forward.position_ids_dependent", False, SOURCE)
        obs.find("forward.position_ids", "info", f"same logits alone, right-padded, left-padded "
                 f"(positions from the mask) and in another batch row (max deviation "
                 f"{max(row, right, left):.3g} <= tolerance {tol:.3g})", lm.where, value)
        return
    obs.fact("forward.position_ids_dependent", True, SOURCE, msg)
    obs.find("forward.position_ids", sev, msg, lm.where, value)


def _fully_masked(lm: LoadedModel, x, z, alone, gen, obs: Observations) -> None:
    import torch

    if not lm.takes("attention_mask"):
        return
    if "forward.mask.fully_masked_nan" in obs.facts:
        return  # the padding test already saw NaN from rows without a visible key
    n = len(x)
    ids = torch.stack([x, z[:n], x])
    mask = torch.ones(3, n, dtype=torch.long)
    mask[1] = 0
    out = _fwd(lm, ids, mask, torch.arange(n).expand(3, n))
    own = not bool(out[1].isfinite().all())
    others = not bool(out[0].isfinite().all() and out[2].isfinite().all())
    tol = tolerance(lm, alone)
    dev = max(deviation(out[0], alone), deviation(out[2], alone))
    value = {"own_row_nan": own, "other_rows_nan": others, "other_rows_deviation": dev, "tolerance": tol}
    obs.fact("forward.mask.fully_masked_nan", own or others, SOURCE,
             "other rows NaN" if others else "own row NaN" if own else "")
    if others:
        obs.find("forward.mask.fully_masked_nan", "error", "an all-zero mask row makes the other rows of "
                 "the batch NaN: one empty sequence ruins the whole step", lm.where, value)
    elif dev > tol and not obs.facts.get("forward.position_ids_dependent", _No).value:
        obs.find("forward.mask.fully_masked", "warning", f"an all-zero mask row changes the other rows "
                 f"of the batch (max deviation {dev:.3g} > tolerance {tol:.3g})", lm.where, value)
    elif own:
        obs.find("forward.mask.fully_masked_nan", "warning", "an all-zero mask row gives NaN in its own "
                 "row (softmax over no visible key, the SDPA pitfall); the NaN reaches the gradients "
                 "even when its labels are -100: drop such rows or let pads attend to themselves",
                 lm.where, value)
    else:
        obs.find("forward.mask.fully_masked", "info", "an all-zero mask row stays finite and leaves the "
                 f"other rows finite (max deviation {dev:.3g}, tolerance {tol:.3g})", lm.where, value)


class _No:
    value = False


def _line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else "")[:200]

