"""Gradient flow: one forward + backward in the checkpoint's dtype (and again in fp32).

Why: frozen or disconnected parameters, dead blocks, NaN weights and fp16 overflow never crash;
training just does not learn, or the loss turns NaN thousands of steps later. One backward pass on
a small batch (the user's, or seeded synthetic tokens) shows all of them at once. The model runs in
eval() (no dropout), so results are deterministic; nothing is written anywhere.

Sample findings (``where  id  message``; tests/modelfactory.py models)::

    info   grads.trainable                 all 0.03M parameters are trainable
    error  grads.dead_layers               no gradient reaches 1 of 2 layers: blocks.1 (their output
                                           is zeroed or cut from the loss)
    error  forward.loss_nonfinite          loss is nan in float16, 4.177 in float32 on synthetic
                                           tokens (2x64); only the low-precision pass fails: an
                                           overflow of its range
    error  forward.first_nonfinite_module  first NaN/Inf output in float16: blocks.0.mlp.scale
                                           (Scale); input abs-max 2.9, output abs-max inf
    error  forward.fp16_overflow_risk      activations reach 2.9e+05 in fp32, above the fp16 maximum
                                           65504 (first at blocks.0.mlp.scale): fp16/AMP overflows here
    info   grads.profile                   global grad norm 0.531; per-layer grad norm: first layers
                                           0.123, last layers 0.123 (1x)

How to read them: ``grads.frozen`` / ``grads.none`` / ``grads.dead_layers`` say where learning
stops (no-grad-flow); ``forward.first_nonfinite_module`` names the layer to inspect first
(a NaN weight, or an overflow when only the low-precision pass fails); ``grads.profile`` is the
per-layer grad-norm profile (seed 001: much larger grads in early layers led OPT to NormFormer).
"""
from __future__ import annotations

import math
from contextlib import contextmanager

from ...errors import LlmfixError
from .model import LoadedModel, batch_for, loaded_model
from ...observations import Observations
from . import nonfinite as nf

SOURCE = "probe:gradflow"
# Every fact this family can publish (kb lint checks them against the rules' facts).
PUBLISHES = (
    "forward.loss_finite", "forward.loss_finite_fp32", "forward.fp16_overflow_risk",
    "forward.initial_loss_gap", "forward.first_nonfinite_module", "forward.activation_absmax",
    "grads.nonfinite", "grads.none_params", "grads.zero_params", "grads.trainable_fraction",
    "grads.global_norm", "grads.first_last_ratio", "grads.dead_layers", "weights.nonfinite",
    "weights.nonfinite_tensors",
)
DEAD_REL = 1e-8          # a layer whose grad norm is below this share of the largest is dead
GRAD_RATIO_WARN = 10.0   # heuristic: first/last layer grad-norm ratio beyond 10x (or below 1/10)
INIT_LOSS_GAP = 1.0      # KNOWLEDGE section 0: |L0 - ln V| > 1 nat at init => logit scale / init bug
FRESH_STD = (0.5, 2.0)   # weights look freshly initialised when median std/initializer_range is here
SHOW = 6                 # parameter names listed in a message


def run(ctx) -> Observations:
    obs = Observations()
    lm = loaded_model(ctx, obs)
    if lm is None:
        return obs
    if lm.notes:
        obs.find("forward.load", "warning", f"{lm.where} does not fully match its architecture "
                 f"({', '.join(lm.notes)}): those weights were initialised at random", lm.where, lm.notes)
    batch, note = batch_for(ctx, lm)
    try:
        _probe(lm, batch, note, obs)
    except LlmfixError:
        raise
    except Exception as err:  # the user's model may raise anything; report, do not crash
        obs.find("forward.error", "warning", f"the model raised {type(err).__name__} during "
                 f"forward/backward: {str(err).strip().splitlines()[0][:200] if str(err).strip() else ''}",
                 where=lm.where)
    finally:
        lm.module.zero_grad(set_to_none=True)
    return obs


class _Pass:
    """One forward (+ backward) in one dtype: loss, per-module abs-max, per-parameter grads."""

    def __init__(self, lm: LoadedModel, batch: dict, trainable: list) -> None:
        import torch

        lm.module.zero_grad(set_to_none=True)
        self.dtype = next((p.dtype for p in lm.module.parameters() if p.is_floating_point()), lm.dtype)
        mode = "absmax" if self.dtype == torch.float32 else "finite"  # fp32: also the fp16 risk scan
        with torch.enable_grad(), nf.ActivationMonitor(lm.module, mode) as mon:
            out = lm(batch["input_ids"], batch["attention_mask"])
            loss = lm.loss(out, batch["labels"])
        self.activations = mon.results()
        self.loss = float(loss.detach())
        self.connected = loss.requires_grad
        self.none, self.norm, self.amax = [], {}, {}
        if self.connected and trainable:
            loss.backward()
            self._read_grads(trainable)
        lm.module.zero_grad(set_to_none=True)

    def _read_grads(self, trainable: list) -> None:
        import torch

        names, norms, maxes = [], [], []
        for name, p in trainable:
            if p.grad is None:
                self.none.append(name)
                continue
            g = p.grad.detach()
            names.append(name)
            norms.append(torch.linalg.vector_norm(g, dtype=torch.float32))
            maxes.append(nf.absmax([g]))
        if names:  # one host sync for all parameters
            both = torch.stack([torch.stack(norms), torch.stack(maxes)]).cpu().tolist()
            self.norm, self.amax = dict(zip(names, both[0])), dict(zip(names, both[1]))

    @property
    def finite(self) -> bool:
        return math.isfinite(self.loss)


@contextmanager
def as_dtype(module, dtype):
    """Cast floating params and buffers to ``dtype``, restoring each one's own dtype afterwards."""
    saved = []
    for t in list(module.parameters()) + list(module.buffers()):
        if t.is_floating_point() and t.dtype != dtype:
            saved.append((t, t.dtype))
            t.data = t.data.to(dtype)
    try:
        yield
    finally:
        module.zero_grad(set_to_none=True)
        for t, old in saved:
            t.data = t.data.to(old)


def _probe(lm: LoadedModel, batch: dict, note: str, obs: Observations) -> None:
    import torch

    where, params = lm.where, list(lm.module.named_parameters())
    trainable = [(n, p) for n, p in params if p.requires_grad]
    total = sum(p.numel() for _, p in params) or 1
    frac = sum(p.numel() for _, p in trainable) / total
    obs.fact("grads.trainable_fraction", frac, SOURCE, f"{len(trainable)} of {len(params)} tensors")
    if not trainable:
        obs.find("grads.frozen", "error", f"no parameter is trainable: all {len(params)} tensors have "
                 "requires_grad=False, so no optimizer step can change the model", where, 0.0)
    else:
        share = "all" if frac == 1.0 else f"{frac:.2%} of"
        obs.find("grads.trainable", "info", f"{share} {total / 1e6:.2f}M parameters are trainable"
                 + (" (adapter-style fine-tuning)" if frac < 0.05 else ""), where, frac)

    main = _Pass(lm, batch, trainable)
    forward = lambda: lm(batch["input_ids"], batch["attention_mask"])  # noqa: E731
    hit, hit_pass = nf.first_nonfinite(main.activations), main
    frames = nf.frames_before(lm.module, forward, hit) if hit is not None else []
    fp32 = main
    if main.dtype != torch.float32:
        with as_dtype(lm.module, torch.float32):
            fp32 = _Pass(lm, batch, trainable)
            hit32 = nf.first_nonfinite(fp32.activations)
            if hit is None and hit32 is not None:
                hit, hit_pass, frames = hit32, fp32, nf.frames_before(lm.module, forward, hit32)
    _report_loss(lm, main, fp32, note, obs)
    if hit is not None:
        _report_first_nonfinite(lm, hit_pass, hit, frames, obs)
    _report_overflow(lm, fp32, obs)
    if trainable:
        _report_grads(lm, main, trainable, obs)
    _report_init_loss(lm, fp32 if fp32.finite else main, obs)


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _report_loss(lm, main: _Pass, fp32: _Pass, note: str, obs: Observations) -> None:
    obs.fact("forward.loss_finite", main.finite, SOURCE, f"loss {main.loss:.4g} in {_name(main.dtype)}")
    obs.fact("forward.loss_finite_fp32", fp32.finite, SOURCE, f"loss {fp32.loss:.4g} in float32")
    both = f"{main.loss:.4g} in {_name(main.dtype)}" + (
        f", {fp32.loss:.4g} in float32" if fp32 is not main else "")
    if main.finite and fp32.finite:
        obs.find("forward.loss", "info", f"loss {both} on {note}", lm.where, main.loss)
        return
    why = ("only the low-precision pass fails: an overflow of its range" if fp32.finite
           else ("also in float32: " if fp32 is not main else "")
           + "NaN/Inf weights, inputs or an unstable operation")
    obs.find("forward.loss_nonfinite", "error", f"loss is {both} on {note}; {why}", lm.where,
             {"loss": main.loss, "loss_fp32": fp32.loss, "dtype": _name(main.dtype)})


def _report_first_nonfinite(lm, pas: _Pass, hit: int, frames: list, obs: Observations) -> None:
    name = pas.activations[hit][0]
    last = frames[-1] if frames else {}
    detail = "; its own weights hold NaN/Inf" if last.get("weight_nonfinite") else ""
    if last:
        detail += f"; input abs-max {_g(last['input_absmax'])}, output abs-max {_g(last['output_absmax'])}"
    severity = "error" if not pas.finite else "warning"
    bad = _nonfinite_weights(lm.module)
    if bad:  # the built model itself holds NaN/Inf: what the weights probe says of a file
        obs.fact("weights.nonfinite", True, SOURCE, ", ".join(bad[:SHOW]))
        obs.fact("weights.nonfinite_tensors", len(bad), SOURCE)
        detail += f"; {len(bad)} weight tensors of the model hold NaN/Inf: {_list(bad)}"
    obs.fact("forward.first_nonfinite_module", name, SOURCE, f"call {hit} of the forward pass")
    obs.find("forward.first_nonfinite_module", severity, f"first NaN/Inf output in {_name(pas.dtype)}: "
             f"{name} ({last.get('class', '?')}){detail}", f"{lm.where}: {name}",
             {"module": name, "dtype": _name(pas.dtype), "frames": frames})


def _nonfinite_weights(module) -> list[str]:
    """Names of parameters and buffers holding NaN/Inf (one host sync)."""
    import torch

    named = [(n, t) for n, t in list(module.named_parameters()) + list(module.named_buffers())
             if t.is_floating_point() and t.numel()]
    if not named:
        return []
    flags = torch.stack([torch.isfinite(nf.finite_sum([t.detach()])) for _, t in named]).cpu().tolist()
    return [n for (n, _), ok in zip(named, flags) if not ok]


def _report_overflow(lm, fp32: _Pass, obs: Observations) -> None:
    ov = nf.overflow(fp32.activations)
    obs.fact("forward.activation_absmax", ov.absmax, SOURCE, ov.top[0][0] if ov.top else "")
    obs.fact("forward.fp16_overflow_risk", ov.risk, SOURCE, ov.first_danger or "")
    value = {"absmax": ov.absmax, "top": [list(t) for t in ov.top], "fp16_max": nf.FP16_MAX}
    if ov.first_over:
        sev = "error" if str(lm.dtype) == "torch.float16" else "warning"
        obs.find("forward.fp16_overflow_risk", sev, f"activations reach {ov.absmax:.3g} in fp32, above "
                 f"the fp16 maximum {nf.FP16_MAX:.0f} (first at {ov.first_over}): fp16/AMP overflows here",
                 f"{lm.where}: {ov.first_over}", value)
    elif ov.first_danger:
        obs.find("forward.fp16_overflow_risk", "warning", f"activations reach {ov.absmax:.3g} in fp32 "
                 f"(first above {nf.FP16_DANGER:.0e} at {ov.first_danger}): close to the fp16 maximum "
                 f"{nf.FP16_MAX:.0f}, products of such values overflow", f"{lm.where}: {ov.first_danger}", value)
    else:
        top = f" ({ov.top[0][0]})" if ov.top else ""
        obs.find("forward.activation_range", "info", f"largest activation |x| in fp32 is "
                 f"{ov.absmax:.3g}{top}, far from the fp16 maximum {nf.FP16_MAX:.0f}", lm.where, value)


def _layer_stack(module) -> str | None:
    """The ModuleList holding the transformer blocks: the one with the most parameters."""
    import torch

    best, size = None, 0
    for name, m in module.named_modules():
        if isinstance(m, torch.nn.ModuleList) and len(m) >= 2:
            n = sum(p.numel() for p in m.parameters())
            if n > size:
                best, size = name, n
    return best


def _group(pname: str, stack: str | None) -> str:
    if stack is not None and pname.startswith(stack + "."):
        return f"{stack}.{pname[len(stack) + 1:].split('.')[0]}"
    return pname.rsplit(".", 1)[0] if "." in pname else pname


def _report_grads(lm, pas: _Pass, trainable: list, obs: Observations) -> None:
    where = lm.where
    if not pas.connected:
        obs.fact("grads.none_params", len(trainable), SOURCE, "the loss does not require grad")
        obs.find("grads.none", "error", "the loss does not require grad: the graph from the trainable "
                 "parameters to the loss is cut (torch.no_grad, .detach(), or frozen inputs under "
                 "reentrant gradient checkpointing)", where, len(trainable))
        return
    params = dict(trainable)
    zero = [n for n, v in pas.amax.items() if v == 0.0 and not _lora_a_expected(n, params)]
    bad = [n for n in pas.norm if not (math.isfinite(pas.norm[n]) and math.isfinite(pas.amax[n]))]
    obs.fact("grads.none_params", len(pas.none), SOURCE, ", ".join(pas.none[:SHOW]))
    obs.fact("grads.zero_params", len(zero), SOURCE, ", ".join(zero[:SHOW]))
    obs.fact("grads.nonfinite", bool(bad), SOURCE, ", ".join(bad[:SHOW]))
    if pas.none:
        every = len(pas.none) == len(trainable)
        obs.find("grads.none", "error" if every else "warning", f"{len(pas.none)} trainable tensors got "
                 f"no gradient (not used by the loss, or disconnected): {_list(pas.none)}", where, pas.none[:50])
    if bad:
        tail = " (follows from the non-finite loss)" if not pas.finite else ""
        obs.find("grads.nonfinite", "error", f"{len(bad)} gradients hold NaN/Inf in {_name(pas.dtype)}"
                 f"{tail}: {_list(bad)}", where, bad[:50])

    stack = _layer_stack(lm.module)
    groups: dict[str, list[str]] = {}
    for n, _ in trainable:
        groups.setdefault(_group(n, stack), []).append(n)
    norm = {g: math.sqrt(sum(pas.norm.get(n, 0.0) ** 2 for n in ns)) for g, ns in groups.items()}
    layers = [g for g in groups if stack is not None and g.startswith(stack + ".")]
    layers.sort(key=lambda g: int(g.rsplit(".", 1)[1]) if g.rsplit(".", 1)[1].isdigit() else 0)
    top = max((v for v in norm.values() if math.isfinite(v)), default=0.0)
    dead = [g for g in layers if top > 0 and norm[g] <= DEAD_REL * top] if not bad else []
    obs.fact("grads.dead_layers", bool(dead), SOURCE, ", ".join(dead))
    if dead:
        obs.find("grads.dead_layers", "error", f"no gradient reaches {len(dead)} of {len(layers)} layers: "
                 f"{_list(dead)} (their output is zeroed or cut from the loss)", where,
                 {g: norm[g] for g in dead})
    dead_params = {n for g in dead for n in groups[g]}
    zero = [n for n in zero if n not in dead_params]
    if zero:
        obs.find("grads.zero", "warning", f"{len(zero)} trainable tensors got an all-zero gradient: "
                 f"{_list(zero)}", where, zero[:50])

    glob = math.sqrt(sum(v * v for v in pas.norm.values())) if not bad else float("nan")
    obs.fact("grads.global_norm", glob, SOURCE)
    profile = {g: norm[g] for g in layers} | {g: v for g, v in norm.items() if g not in layers}
    msg, sev, ratio = f"global grad norm {glob:.3g}", "info", None
    live = [norm[g] for g in layers if norm[g] > 0 and math.isfinite(norm[g])]
    if len(live) >= 2:
        k = max(1, len(live) // 4)
        first, last = sum(live[:k]) / k, sum(live[-k:]) / k
        ratio = first / last
        obs.fact("grads.first_last_ratio", ratio, SOURCE, f"first {k} vs last {k} layers")
        msg += f"; per-layer grad norm: first layers {first:.3g}, last layers {last:.3g} ({ratio:.2g}x)"
        if ratio > GRAD_RATIO_WARN or ratio < 1 / GRAD_RATIO_WARN:
            sev = "warning"
            msg += (" - early layers get much larger gradients (OPT saw this and tried NormFormer)"
                    if ratio > 1 else " - gradients vanish towards the first layers")
    obs.find("grads.profile", sev, msg, where, {"global": glob, "first_last_ratio": ratio, "layers": profile})


def _lora_a_expected(name: str, params: dict) -> bool:
    """LoRA A gets a zero gradient while its B is still all zero (B starts at zero)."""
    if "lora_A" not in name:
        return False
    b = params.get(name.replace("lora_A", "lora_B"))
    return b is not None and not bool(b.detach().any())


def _report_init_loss(lm, pas: _Pass, obs: Observations) -> None:
    if lm.head == "base" or not pas.finite or lm.vocab_size < 2:
        return
    ln_v = math.log(lm.vocab_size)
    gap = abs(pas.loss - ln_v)
    fresh = _looks_fresh(lm)
    value = {"loss": pas.loss, "ln_vocab": ln_v, "gap": gap, "fresh": fresh}
    if fresh:
        obs.fact("forward.initial_loss_gap", gap, SOURCE, f"loss {pas.loss:.3f} vs ln({lm.vocab_size})")
    if fresh and gap > INIT_LOSS_GAP:
        obs.find("forward.init_loss", "warning", f"the model looks freshly initialised but its loss is "
                 f"{pas.loss:.3f}, {gap:.2f} nats from ln(vocab) = {ln_v:.3f}: check the init std, the "
                 "logit scale and the labels", lm.where, value)
    else:
        state = "freshly initialised" if fresh else "trained (or of unknown init)"
        obs.find("forward.init_loss", "info", f"loss {pas.loss:.3f} vs ln(vocab) = {ln_v:.3f} "
                 f"(model looks {state})", lm.where, value)


def _looks_fresh(lm) -> bool | None:
    """Median std of the weight matrices close to initializer_range: a model before training."""
    if not lm.initializer_range:
        return None
    ratios = []
    for name, p in lm.module.named_parameters():
        if p.dim() == 2 and name.endswith("weight") and p.numel() > 1:
            flat = p.detach().flatten()
            ratios.append(float(flat[:: max(1, flat.numel() // 65536)].float().std()) / lm.initializer_range)
    if not ratios:
        return None
    ratios.sort()
    return FRESH_STD[0] <= ratios[len(ratios) // 2] <= FRESH_STD[1]


def _g(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def _list(names: list) -> str:
    return ", ".join(names[:SHOW]) + (f" (+{len(names) - SHOW} more)" if len(names) > SHOW else "")
