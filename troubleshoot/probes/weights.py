"""Weights probe: streams every tensor once and audits values and initialisation scale.

One pass, one tensor at a time (safetensors and torch zip files read tensor by tensor, other
pickles through ``torch.load(mmap=True, weights_only=True)`` with pages dropped behind the
reader), so memory stays near the largest tensor. Per tensor it computes a handful of numbers
(NaN/Inf counts, min, max, mean, std) and a ``Tally`` keeps what the findings need, so 100,000
tiny tensors cost no memory per tensor here. Three reductions (aminmax, sum, L2 norm) give all of them; NaN and Inf
propagate into min/max/norm, so the exact counting pass runs only on tensors that have any.

Sample output and how to read it::

    model.safetensors:h.3.mlp.c_fc.weight  weights.nonfinite       error    12 NaN, 0 Inf of 16384 values
    pytorch_model.bin:lm_head.weight       weights.fp16_overflow   error    max |w| = 7.1e+04 > 65504 (fp16 max) and
            the run is fp16
    model.safetensors                      weights.init_std        error    hidden matrices std 0.497 = 6.3x
            sqrt(2/(5*64)) = 0.0791 (early checkpoint: step 0 ...)
    model.safetensors                      weights.output_unscaled warning  output projections std/hidden std
            = 1.00; with depth scaling 1/sqrt(2*4) = 0.35
    model.safetensors                      weights.no_embed_norm   info     no LayerNorm after the token embedding

Init findings compare the *hidden* matrices (QKV, MLP-in: c_attn, q/k/v_proj, query_key_value,
dense_h_to_4h ...) with sqrt(2/(5*hidden)) and the *output* projections (attention out, MLP out:
c_proj, o_proj, down_proj, dense, dense_4h_to_h ...) with that std divided by sqrt(2*layers)
(BLOOM lessons learned, seed 004). Training moves these statistics, so the audit runs only on an
early checkpoint; the finding says which step it assumed and where the step came from.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field

from ..loaders.checkpoint import Checkpoint, iter_weights, open_checkpoint
from ..observations import Observations
from .config import pick, run_dtype
from .context import ProbeContext
from .weights_export import ExportAudit

SOURCE = "probe:weights"
# Every fact this family can publish (kb lint checks them against the rules' facts).
PUBLISHES = (
    "weights.nonfinite", "weights.nonfinite_tensors", "weights.fp16_overflow", "weights.max_abs",
    "weights.zero_tensors", "model.has_embed_layernorm", "weights.layernorm_gain_off",
    "weights.init_std", "weights.init_std_ratio", "weights.hidden_std", "weights.early_checkpoint",
    "weights.output_std_ratio", "weights.output_layers_scaled",
    # weights_export.py: is the saved model the trained model?
    "weights.empty_tensors", "weights.tie_broken", "weights.untrained_token_rows", "weights.lora_saves_embeddings",
    "weights.lora_target_count", "export.only_adapter_files",
)
FP16_MAX = 65504.0
EARLY_STEPS = 1000        # heuristic: init statistics still hold this close to step 0
GAIN_DRIFT_EARLY = 0.1    # mean |g - 1| of norm gains still "at init"
GAIN_RANGE = (0.05, 20.0)  # heuristic: mean |g| outside this is a collapsed or exploded norm
INIT_WARN, INIT_ERROR = 1.5, 3.0  # measured hidden std / sqrt(2/(5*hidden))
MAX_LISTED = 10

ROLES = (  # first match wins; matched against the lower-cased tensor name
    ("embed_norm", r"(word_embeddings_layernorm|embed_layer_?norm|embedding\.layer_?norm|emb_ln|ln_emb|embed_norm"
                   r"|embeddings\.layer_?norm)"),
    ("norm", r"(norm|(^|\.)ln(_\w+)?\.|layernorm)"),
    ("position", r"(wpe|position_embeddings|pos_emb|embed_positions)"),
    ("embedding", r"(wte|embed_tokens|word_embeddings|tok_embeddings|embed_in)\.weight$"),
    ("lm_head", r"(lm_head|output_layer|embed_out)\.weight$"),
    ("output", r"(attn\.c_proj|mlp\.c_proj|o_proj|down_proj|attention\.dense\.|dense_4h_to_h|linear_proj"
               r"|linear_fc2|out_proj|(^|\.)(fc2|w2|wo|fc_out)\.)"),
    ("hidden", r"(c_attn|c_fc|q_proj|k_proj|v_proj|qkv_proj|gate_proj|up_proj|gate_up_proj|query_key_value"
               r"|dense_h_to_4h|linear_qkv|linear_fc1|wqkv|(^|\.)(query|key|value|fc1|w1|w3|wq|wk|wv|fc_in)\.)"),
)
LAYER = re.compile(r"(?:^|[./_])(?:layers|layer|h|blocks|block)[._](\d+)[./-]")
_ROLES = tuple((role, re.compile(pattern)) for role, pattern in ROLES)
_NORM_BIAS = re.compile(ROLES[0][1] + "|" + ROLES[1][1])


def classify(name: str, ndim: int) -> str:
    """Role of a tensor: embedding, position, embed_norm, norm, lm_head, hidden, output, bias, other."""
    low = name.lower()
    if low.endswith("bias"):
        return "norm_bias" if _NORM_BIAS.search(low) else "bias"
    for role, pattern in _ROLES:
        if pattern.search(low):
            if role in ("hidden", "output") and ndim < 2:
                return "other"
            return role
    return "other"


@dataclass(slots=True)
class Stat:
    where: str
    name: str
    role: str
    layer: int | None
    numel: int
    dtype: str
    cols: int | None = None  # last dimension of a matrix (hidden size of an embedding)
    nan: int = 0
    inf: int = 0
    min: float = 0.0
    max: float = 0.0
    mean: float = 0.0
    std: float = 0.0
    gain_drift: float = 0.0  # mean |g - 1| (norm gains only)


def tensor_stat(t, where: str, name: str) -> Stat | None:
    """The numbers kept per tensor; None for integer / empty tensors."""
    import torch

    if not t.is_floating_point() or t.numel() == 0:
        return None
    m = LAYER.search(name) or LAYER.search(where)  # Megatron-DeepSpeed: layer_03-model_00-model_states.pt
    s = Stat(where, name, classify(name, t.dim()), int(m.group(1)) if m else None, t.numel(),
             str(t.dtype).replace("torch.", ""), int(t.shape[-1]) if t.dim() == 2 else None)
    flat = t.reshape(-1)
    if flat.dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        flat = flat.float()
    if s.numel <= 1 << 20 or s.role in ("norm", "embed_norm"):  # small: exact, in float64
        flat = flat.double()
    mn, mx = torch.aminmax(flat)
    total, norm = float(flat.sum()), float(torch.linalg.vector_norm(flat))
    s.min, s.max = float(mn), float(mx)
    if not all(map(math.isfinite, (s.min, s.max, total, norm))):
        s.nan, s.inf = int(torch.isnan(flat).sum()), int(torch.isinf(flat).sum())
        if s.nan or s.inf:
            return s
        norm = float(torch.linalg.vector_norm(flat.double()))  # only the fp32 sum of squares overflowed
    s.mean = total / s.numel
    s.std = math.sqrt(max(norm * norm / s.numel - s.mean * s.mean, 0.0)) if s.min != s.max else 0.0
    if s.role in ("norm", "embed_norm") and t.dim() == 1:
        s.gain_drift = float((flat - 1).abs().mean())
    return s


def run(ctx: ProbeContext) -> Observations:
    obs = Observations()
    for art in ctx.of_kind("hf-checkpoint", "megatron-checkpoint", "state-dict"):
        ckpt = open_checkpoint(art.path)
        if ckpt.weight_files:
            export = ExportAudit()
            audit(ckpt, stream(ckpt, ctx.progress, export), obs)
            export.report(ckpt, obs)
    return obs


def stream(ckpt: Checkpoint, progress=None, export: ExportAudit | None = None) -> Tally:
    """The ``Tally`` of every weight, one tensor in memory at a time (each tensor is also shown
    to ``export``, the saved-model audit, when given).

    ``progress(done_bytes, total_bytes, name)``, when given (``ProbeContext.progress``),
    is called after each tensor so a terminal can draw a bar over large checkpoints.
    """
    total = sum(f.stat().st_size for f in ckpt.weight_files)
    done, tally, where = 0, Tally(), {}
    for f, name, t in iter_weights(ckpt):
        if f not in where:
            where[f] = ckpt.rel(f)
        s = tensor_stat(t, where[f], name)
        if export is not None:
            export.see(where[f], name, t)
        if s is not None:
            tally.add(s)
        if progress is not None:
            done += t.numel() * t.element_size()
            progress(min(done, total), total, name)
        del t
    return tally


def _max_abs(s: Stat) -> float:
    return max(abs(s.min), abs(s.max))


@dataclass
class Listed:
    """How many tensors a finding concerns, and the first MAX_LISTED of them (the ones named)."""

    count: int = 0
    first: list[Stat] = field(default_factory=list)

    def add(self, s: Stat) -> None:
        self.count += 1
        if len(self.first) < MAX_LISTED:
            self.first.append(s)


@dataclass
class Tally:
    """What the audit needs from every tensor, in memory bounded by the checkpoint's structure
    rather than its tensor count: counts, the first MAX_LISTED tensors of each finding, and the
    Stats of the roles whose medians and per-layer numbers are taken (hidden and output matrices,
    norm gains). 100,000 tensors of other roles cost nothing here."""

    tensors: int = 0
    bad: Listed = field(default_factory=Listed)    # NaN/Inf
    good: int = 0
    top: Stat | None = None                                  # largest |w| of the finite tensors
    any_fp16: bool = False
    over: Listed = field(default_factory=Listed)   # finite but above the fp16 range
    flat: Listed = field(default_factory=Listed)   # constant matrices
    kept: list[Stat] = field(default_factory=list)     # roles hidden, output, norm, embed_norm
    roles: set[str] = field(default_factory=set)
    embed_cols: int | None = None
    layers: int = 0                                      # 1 + the largest layer index seen

    def add(self, s: Stat) -> None:
        self.tensors += 1
        self.any_fp16 = self.any_fp16 or s.dtype == "float16"
        if s.nan or s.inf:
            self.bad.add(s)
            return
        self.good += 1
        self.roles.add(s.role)
        if self.top is None or _max_abs(s) > _max_abs(self.top):
            self.top = s
        if _max_abs(s) > FP16_MAX:
            self.over.add(s)
        if s.min == s.max and s.numel > 1 and (
                s.role in ("hidden", "output", "embedding", "lm_head") or s.role == "other" and s.numel >= 1024):
            self.flat.add(s)
        if s.role in ("hidden", "output", "norm", "embed_norm"):
            self.kept.append(s)
        if s.role == "embedding" and self.embed_cols is None:
            self.embed_cols = s.cols
        if s.layer is not None:
            self.layers = max(self.layers, s.layer + 1)

    def of(self, *roles: str) -> list[Stat]:
        return [s for s in self.kept if s.role in roles]


def audit(ckpt: Checkpoint, tally: Tally, obs: Observations) -> None:
    """Turn the tally of per-tensor numbers into findings and facts."""
    cfg = ckpt.config or {}
    for s in tally.bad.first:
        obs.find("weights.nonfinite", "error", f"{s.nan} NaN, {s.inf} Inf of {s.numel} values", f"{s.where}:{s.name}",
                 {"nan": s.nan, "inf": s.inf, "numel": s.numel})
    if tally.bad.count > MAX_LISTED:
        obs.find("weights.nonfinite", "error", f"... and {tally.bad.count - MAX_LISTED} more tensors with NaN/Inf",
                 ckpt.rel(ckpt.weight_files[0]), tally.bad.count)
    obs.fact("weights.nonfinite", bool(tally.bad.count), SOURCE, f"{tally.bad.count} of {tally.tensors} tensors")
    obs.fact("weights.nonfinite_tensors", tally.bad.count, SOURCE)
    if not tally.good:
        return
    _fp16(ckpt, cfg, tally, obs)
    for s in tally.flat.first:
        what = "all zero" if s.max == 0 else f"constant {s.max:g}"
        obs.find("weights.constant_tensor", "warning", f"{what} ({s.numel} values): this layer learns nothing "
                 "useful (zero init of a readout/LoRA-B is the only common legitimate case)", f"{s.where}:{s.name}",
                 s.max)
    obs.fact("weights.zero_tensors", tally.flat.count, SOURCE)
    norms = tally.of("norm", "embed_norm")  # gains; biases are "norm_bias"
    has_embed_norm = "embed_norm" in tally.roles
    obs.fact("model.has_embed_layernorm", has_embed_norm, SOURCE, "tensor names")
    if not has_embed_norm and "embedding" in tally.roles:
        obs.find("weights.no_embed_norm", "info", "no LayerNorm after the token embedding (BLOOM added one, "
                 "--embed-layernorm, against spikes it could not recover from; only possible from step 0)",
                 ckpt.rel(ckpt.weight_files[0]), False)
    hidden_std = [s.std for s in tally.of("hidden") if s.std > 0]
    if hidden_std:  # any checkpoint: a randn-scale std is wrong whether or not the weights were trained
        obs.fact("weights.hidden_std", round(statistics.median(hidden_std), 6), SOURCE,
                 f"median std of {len(hidden_std)} hidden matrices")
    early, why = _early(ckpt, norms)
    obs.fact("weights.early_checkpoint", early, SOURCE, why)
    _gains(norms, early, obs)
    if early:
        _init(ckpt, cfg, tally, why, obs)
    else:
        obs.find("weights.init_audit_skipped", "info", f"init-std audit skipped: {why}; trained weights no longer "
                 "show their initial scale", ckpt.rel(ckpt.weight_files[0]), ckpt.iteration)


def _fp16(ckpt: Checkpoint, cfg: dict, tally: Tally, obs: Observations) -> None:
    max_abs = _max_abs(tally.top)
    obs.fact("weights.max_abs", max_abs, SOURCE, f"{tally.top.where}:{tally.top.name}")
    dtype = run_dtype(cfg, ckpt.extra) or ("fp16" if tally.any_fp16 else None)
    if dtype == "fp16":
        obs.fact("weights.fp16_overflow", bool(tally.over.count), SOURCE, f"max |w| {max_abs:.3g}")
    for s in tally.over.first:
        m = _max_abs(s)
        if dtype == "fp16":
            obs.find("weights.fp16_overflow", "error", f"max |w| = {m:.3g} > {FP16_MAX:.0f} (fp16 max) and the run is "
                     "fp16: this weight becomes inf when cast", f"{s.where}:{s.name}", m)
        else:
            obs.find("weights.fp16_range", "warning", f"max |w| = {m:.3g} exceeds the fp16 range: do not run or "
                     "fine-tune this model in fp16", f"{s.where}:{s.name}", m)


def _early(ckpt: Checkpoint, norms: list[Stat]) -> tuple[bool, str]:
    """Is this checkpoint close enough to initialisation for init statistics to mean anything?"""
    drift = max((s.gain_drift for s in norms), default=None)
    step, src = ckpt.iteration, ckpt.iteration_source
    if step is None:
        step, src = _optimizer_step(ckpt)
    if step is not None:
        if step > EARLY_STEPS:
            return False, f"trained checkpoint: step {step} from {src}"
        if drift is not None and drift > GAIN_DRIFT_EARLY:
            return False, (f"step {step} from {src}, but norm gains have moved (max mean |g-1| = {drift:.2f}), "
                           "so a fine-tune of trained weights")
        return True, f"early checkpoint: step {step} from {src}"
    if drift is not None and drift < 1e-6:
        return True, "no step recorded; every norm gain is exactly 1.0, so these are freshly initialised weights"
    if drift is not None and drift < 0.01:
        return True, f"no step recorded; norm gains still within {drift:.3f} of 1.0: assumed near initialisation"
    return False, "no step recorded and norm gains have moved: assumed trained"


def _optimizer_step(ckpt: Checkpoint) -> tuple[int | None, str]:
    from .optimizer import read_step

    return read_step(ckpt)


def _gains(norms: list[Stat], early: bool, obs: Observations) -> None:
    lo, hi = GAIN_RANGE
    off = [s for s in norms if s.numel > 1 and (
        (early and s.gain_drift > 0.5) or not lo <= abs(s.mean) <= hi)]
    obs.fact("weights.layernorm_gain_off", bool(off), SOURCE, f"{len(norms)} norm gains")
    for s in off[:MAX_LISTED]:
        obs.find("weights.layernorm_gain", "warning", f"norm gain mean {s.mean:.3g} (mean |g-1| = {s.gain_drift:.3g}): "
                 f"far from 1{' at initialisation' if early else ''}", f"{s.where}:{s.name}", round(s.mean, 4))


def _init(ckpt: Checkpoint, cfg: dict, tally: Tally, why: str, obs: Observations) -> None:
    hidden = [s for s in tally.of("hidden") if s.std > 0]
    output = [s for s in tally.of("output") if s.std > 0]
    h = pick(cfg, "hidden_size") or tally.embed_cols
    n_layers = pick(cfg, "num_layers") or tally.layers or None
    where = ckpt.rel(ckpt.weight_files[0]) if len(ckpt.weight_files) == 1 else (
        ckpt.root.name if ckpt.rel(ckpt.root) == "." else ckpt.rel(ckpt.root))
    if not hidden or not isinstance(h, int):
        return
    sigma = statistics.median(s.std for s in hidden)
    formula = math.sqrt(2 / (5 * h))
    ratio = sigma / formula
    per_layer = _per_layer(hidden)
    obs.fact("weights.init_std", round(sigma, 6), SOURCE, why)
    obs.fact("weights.init_std_ratio", round(ratio, 3), SOURCE, f"median std of {len(hidden)} hidden matrices / "
             f"sqrt(2/(5*{h}))")
    severity = "error" if ratio >= INIT_ERROR else "warning" if ratio >= INIT_WARN else "info"
    worst = max(hidden, key=lambda s: s.std)
    obs.find("weights.init_std", severity, f"hidden matrices std {sigma:.4g} = {ratio:.2f}x sqrt(2/(5*{h})) = "
             f"{formula:.4g} ({why}); largest: {worst.name} {worst.std:.4g}", where,
             {"std": round(sigma, 6), "formula": round(formula, 6), "ratio": round(ratio, 3), "per_layer": per_layer})
    init = pick(cfg, "initializer_range")
    if isinstance(init, (int, float)) and init > 0 and not 0.5 <= sigma / init <= 2:
        obs.find("weights.init_std_config", "warning", f"hidden matrices std {sigma:.4g} but the config's "
                 f"initializer_range is {init:g} ({sigma / init:.1f}x): the weights were not initialised the way the "
                 "config says", where, round(sigma / init, 3))
    if output and isinstance(n_layers, int) and n_layers > 0:
        out_ratio = statistics.median(s.std for s in output) / sigma
        target = 1 / math.sqrt(2 * n_layers)
        scaled = abs(math.log(out_ratio / target)) < abs(math.log(out_ratio))
        obs.fact("weights.output_std_ratio", round(out_ratio, 4), SOURCE, "output projections std / hidden std")
        obs.fact("weights.output_layers_scaled", scaled, SOURCE, f"std ratio {out_ratio:.3f} vs 1/sqrt(2*{n_layers}) "
                 f"= {target:.3f}")
        if not scaled:
            obs.find("weights.output_unscaled", "warning", f"output projections std/hidden std = {out_ratio:.2f}; "
                     f"with depth scaling it would be 1/sqrt(2*{n_layers}) = {target:.2f} (Megatron/BLOOM divide the "
                     "attention-out and MLP-out init std by sqrt(2*layers))", where,
                     {"ratio": round(out_ratio, 4), "target": round(target, 4)})


def _per_layer(hidden: list[Stat]) -> dict:
    by_layer: dict[int, list[float]] = {}
    for s in hidden:
        if s.layer is not None:
            by_layer.setdefault(s.layer, []).append(s.std)
    return {k: round(statistics.median(v), 6) for k, v in sorted(by_layer.items())}
