"""Optimizer probe: Adam state, LR schedule and loss scale from a saved training state.

Reads torch Adam/AdamW state dicts (HF Trainer optimizer.pt, a bare optimizer .pt), Megatron-LM's
``optimizer`` entry and DeepSpeed ZeRO ``*optim_states.pt`` shards -- wherever weights_only can
read them -- plus scheduler.pt, trainer_state.json's logged learning rates, Megatron/DeepSpeed LR
scheduler dicts and the fp16 loss scaler. Every per-parameter state dict holding ``exp_avg_sq``
is found by walking the loaded object, so the layout of each framework needs no special case.

Sample output and how to read it::

    optimizer.pt                  optimizer.hparams        info     AdamW lr 0.0003, betas (0.9, 0.999), eps 1e-08,
            weight_decay 0.1, step 6210
    optimizer.pt:state.17         optimizer.nonfinite      error    exp_avg_sq holds 3 NaN / 0 Inf (h.2.mlp.c_fc.weight)
    optimizer.pt                  optimizer.exp_avg_sq     info     exp_avg_sq max 2.1e-05 (h.0.attn.c_attn.weight),
            L1 0.034; by layer: ...
    optimizer.pt                  optimizer.eps_dominated  warning  62% of sqrt(v_hat) are below eps=1e-08: Adam is
            no longer scale-free there
    trainer_state.json            optimizer.near_warmup_end warning step 6210 is just past the end of LR
            warmup (step 6000, lr peak 6e-05) ...

``exp_avg_sq`` is Adam's running mean of squared gradients: BLOOM's tr8-104B notes (seed 002)
found its L1 norm and max peak at the LR peak, where divergence risk is highest, so a checkpoint
within about three warmup lengths after the peak is flagged. Parameter names come from the
checkpoint's own model definition (HF, built on the meta device) when shapes match; otherwise
the location is the state's index.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from ..loaders.checkpoint import Checkpoint, load_training_file, open_checkpoint
from ..loaders.tensors import is_optimizer_state
from ..loaders.torchzip import as_tensor, is_tensor
from ..observations import Observations
from .context import ProbeContext

SOURCE = "probe:optimizer"
# Every fact this family can publish (kb lint checks them against the rules' facts).
PUBLISHES = (
    "optimizer.beta1", "optimizer.beta2", "optimizer.eps", "optimizer.lr", "optimizer.weight_decay",
    "optimizer.step", "optimizer.step_mismatch", "optimizer.nonfinite", "optimizer.exp_avg_sq_max",
    "optimizer.exp_avg_sq_l1", "optimizer.eps_dominated_fraction", "optimizer.loss_scale",
    "optimizer.warmup_steps", "optimizer.near_warmup_end",
)
EPS_WARN = 0.5             # heuristic: half of the moments below eps
NEAR_WARMUP = (0.9, 3.0)   # step / warmup_end; seed 002: glitches at 1-1.2x, grad variance settles by ~3x
MAX_LISTED = 10


def run(ctx: ProbeContext) -> Observations:
    obs = Observations()
    for art in ctx.of_kind("hf-checkpoint", "megatron-checkpoint", "state-dict"):
        ckpt = open_checkpoint(art.path)
        if ckpt.optimizer_files or ckpt.scheduler_file or ckpt.trainer_state or ckpt.extra.get("lr_scheduler"):
            probe(ckpt, obs)
    return obs


def walk(obj: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, dict]]:
    """(location, per-parameter state) for every dict holding an ``exp_avg_sq`` tensor."""
    if depth > 6:
        return
    if isinstance(obj, dict):
        if is_tensor(obj.get("exp_avg_sq")):
            yield path, obj
            return
        for k, v in obj.items():
            if k not in ("param_groups", "args", "rng_state", "model", "module"):
                yield from walk(v, f"{path}.{k}" if path else str(k), depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from walk(v, f"{path}.{i}" if path else str(i), depth + 1)


def param_groups(obj: Any, depth: int = 0) -> list[dict]:
    if is_optimizer_state(obj):
        return [g for g in obj["param_groups"] if isinstance(g, dict)]
    if isinstance(obj, dict) and depth < 4:
        for v in obj.values():
            if found := param_groups(v, depth + 1):
                return found
    return []


def _num(v: Any) -> float | None:
    if is_tensor(v) and v.numel() == 1:
        v = as_tensor(v).item()
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def read_step(ckpt: Checkpoint) -> tuple[int | None, str]:
    """Optimizer step count (first state's ``step``), for probes that need the training progress."""
    for f in ckpt.optimizer_files:
        obj, _ = load_training_file(f)
        for _, state in walk(obj):
            step = _num(state.get("step"))
            if step is not None:
                return int(step), f"{ckpt.rel(f)} optimizer step"
    return None, ""


def probe(ckpt: Checkpoint, obs: Observations) -> None:
    step = None
    for f in ckpt.optimizer_files:
        obj, why = load_training_file(f)
        if obj is None:
            obs.find("optimizer.unreadable", "warning", f"optimizer state not read: {why}", ckpt.rel(f))
            continue
        step = _states(ckpt, f, obj, obs) or step
        _loss_scale(ckpt.rel(f), obj, obs)
    if "scaler_file" in ckpt.extra and (obj := load_training_file(ckpt.extra["scaler_file"])[0]) is not None:
        _loss_scale(ckpt.rel(ckpt.extra["scaler_file"]), {"grad_scaler": obj}, obs)
    _schedule(ckpt, step, obs)


def _states(ckpt: Checkpoint, f, obj: Any, obs: Observations) -> int | None:
    import torch

    where_f = ckpt.rel(f)
    groups = param_groups(obj)
    g = groups[0] if groups else {}
    betas = g.get("betas") or (g.get("beta1"), g.get("beta2"))
    beta1, beta2, eps = _num(betas[0]) if betas else None, _num(betas[1]) if betas else None, _num(g.get("eps"))
    for name, value in (("optimizer.beta1", beta1), ("optimizer.beta2", beta2), ("optimizer.eps", eps),
                        ("optimizer.lr", _num(g.get("lr"))), ("optimizer.weight_decay", _num(g.get("weight_decay")))):
        if value is not None:
            obs.fact(name, value, SOURCE, where_f)
    states = list(walk(obj))
    if not states:
        return None
    steps = [int(s) for _, st in states if (s := _num(st.get("step"))) is not None]
    step = max(steps) if steps else None
    if step is not None:
        obs.fact("optimizer.step", step, SOURCE, where_f)
    names = _param_names(ckpt, groups, states)
    correction = 1 - (beta2 or 0.999) ** max(step or 1, 1)
    threshold = (eps or 1e-8) ** 2 * correction  # sqrt(v / correction) < eps
    rows, bad, below, nonzero = [], [], 0, 0
    for where, st in states:
        label = names.get(where, where)
        v = as_tensor(st["exp_avg_sq"])  # one state's tensors in memory at a time
        if not v.is_floating_point() or v.numel() == 0:
            continue
        vmax, l1 = float(v.max()), float(v.sum(dtype=torch.float64))
        m = as_tensor(st.get("exp_avg"))
        m_ok = not hasattr(m, "dim") or math.isfinite(float(torch.linalg.vector_norm(m.float())))
        if not (math.isfinite(vmax) and math.isfinite(l1) and m_ok):
            nan = int(torch.isnan(v).sum()) + (int(torch.isnan(m).sum()) if hasattr(m, "dim") else 0)
            inf = int(torch.isinf(v).sum()) + (int(torch.isinf(m).sum()) if hasattr(m, "dim") else 0)
            bad.append((where, label, nan, inf))
            continue
        nz = int((v > 0).sum())
        below += int(((v > 0) & (v < threshold)).sum())
        nonzero += nz
        rows.append((label, vmax, l1))
    for where, label, nan, inf in bad[:MAX_LISTED]:
        obs.find("optimizer.nonfinite", "error", f"Adam moments hold {nan} NaN / {inf} Inf"
                 + (f" ({label})" if label != where else ""), f"{where_f}:{where}", {"nan": nan, "inf": inf})
    obs.fact("optimizer.nonfinite", bool(bad), SOURCE, f"{len(bad)} of {len(states)} parameter states")
    kind = "AdamW" if g.get("decoupled_weight_decay") or (g.get("weight_decay") or 0) > 0 else "Adam"
    obs.find("optimizer.hparams", "info", f"{kind} lr {g.get('lr')}, betas ({beta1}, {beta2}), eps {eps}, "
             f"weight_decay {g.get('weight_decay')}, step {step}", where_f,
             {"lr": _num(g.get("lr")), "beta1": beta1, "beta2": beta2, "eps": eps, "step": step})
    if rows:
        top = max(rows, key=lambda r: r[1])
        total = sum(r[2] for r in rows)
        obs.fact("optimizer.exp_avg_sq_max", top[1], SOURCE, top[0])
        obs.fact("optimizer.exp_avg_sq_l1", total, SOURCE, where_f)
        ranked = sorted(rows, key=lambda r: -r[1])[:5]
        obs.find("optimizer.exp_avg_sq", "info", f"exp_avg_sq max {top[1]:.3g} ({top[0]}), L1 {total:.3g}; largest: "
                 + ", ".join(f"{r[0]} {r[1]:.2g}" for r in ranked), where_f,
                 {"max": top[1], "l1": total, "by_param": {r[0]: {"max": r[1], "l1": r[2]} for r in ranked},
                  "by_layer": _by_layer(rows)})
    if nonzero:
        frac = below / nonzero
        obs.fact("optimizer.eps_dominated_fraction", round(frac, 4), SOURCE,
                 f"eps {eps}, bias-corrected at step {step}")
        if frac >= EPS_WARN:
            obs.find("optimizer.eps_dominated", "warning", f"{frac:.0%} of sqrt(v_hat) are below eps={eps}: there Adam "
                     "is no longer scale-free (lower eps; OLMo 2 went from 1e-5 to 1e-8)", where_f, round(frac, 4))
    return step


def _by_layer(rows: list[tuple[str, float, float]]) -> dict:
    import re

    out: dict[str, list[float]] = {}
    for label, vmax, l1 in rows:
        m = re.search(r"(?:layers|layer|h|blocks)\.(\d+)\.", label)
        if m:
            cur = out.setdefault(m.group(1), [0.0, 0.0])
            cur[0], cur[1] = max(cur[0], vmax), cur[1] + l1
    return {k: {"max": v[0], "l1": v[1]} for k, v in sorted(out.items(), key=lambda kv: int(kv[0]))}


def _param_names(ckpt: Checkpoint, groups: list[dict], states: list[tuple[str, dict]]) -> dict[str, str]:
    """state location -> parameter name, rebuilding the HF Trainer's param groups on the meta device.

    Trusted only when every group size and every state shape matches; else locations stay indices.
    """
    if ckpt.kind != "hf-checkpoint" or not ckpt.config or not groups or ckpt.config_source != "config.json":
        return {}
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, Trainer

        cfg = AutoConfig.from_pretrained(str(ckpt.root), local_files_only=True, trust_remote_code=False)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(cfg)
        decay = set(Trainer.get_decay_parameter_names(None, model))
        named = list(model.named_parameters())
        order = [n for n, _ in named if n in decay] + [n for n, _ in named if n not in decay]
        shapes = dict((n, tuple(p.shape)) for n, p in named)
    except Exception:  # noqa: BLE001 - names are a convenience; custom or unknown models keep indices
        return {}
    ids = [i for g in groups for i in g.get("params", [])]
    if len(ids) != len(order) or [len(g.get("params", [])) for g in groups] != [
            len([n for n in order if n in decay]), len(order) - len([n for n in order if n in decay])][:len(groups)]:
        return {}
    by_id = dict(zip(ids, order))
    out = {}
    for where, st in states:
        key = where.split(".")[-1]
        name = by_id.get(int(key)) if key.isdigit() else None
        if name is None or tuple(st["exp_avg_sq"].shape) != shapes[name]:
            return {}
        out[where] = name
    return out


def _loss_scale(where: str, obj: Any, obs: Observations, depth: int = 0) -> bool:
    """fp16 loss scale from a GradScaler / Megatron grad_scaler dict, wherever it sits."""
    if not isinstance(obj, dict) or depth > 3:
        return False
    for key in ("grad_scaler", "loss_scaler", "scaler"):
        sc = obj.get(key)
        if isinstance(sc, dict) and (scale := _num(sc.get("scale", sc.get("cur_scale")))) is not None:
            obs.fact("optimizer.loss_scale", scale, SOURCE, where)
            if scale <= 1:
                obs.find("optimizer.loss_scale", "warning", f"fp16 loss scale has fallen to {scale:g}: gradients "
                         "overflow again and again (loss-scale collapse)", where, scale)
            return True
    return any(_loss_scale(where, v, obs, depth + 1) for k, v in obj.items()
               if isinstance(v, dict) and k not in ("state", "model", "module"))


def _schedule(ckpt: Checkpoint, step: int | None, obs: Observations) -> None:
    """Where the run stands in its LR schedule; is it at or just after the end of warmup?"""
    warmup, peak, where, cur = None, None, "", step
    sched = load_training_file(ckpt.scheduler_file)[0] if ckpt.scheduler_file else None
    base = None
    if isinstance(sched, dict):
        base = max((b for b in sched.get("base_lrs") or [] if isinstance(b, (int, float))), default=None)
        last = _num(sched.get("last_epoch"))
        where = ckpt.rel(ckpt.scheduler_file)
        if last is not None and step is not None and int(last) != step:
            obs.find("optimizer.step_mismatch", "warning",
                     f"optimizer step {step} but scheduler last_epoch {int(last)}: one of them was reset on "
                     "resume, so the LR schedule restarted", where, [step, int(last)])
            obs.fact("optimizer.step_mismatch", True, SOURCE, where)
        cur = cur if cur is not None else (int(last) if last is not None else None)
    mg = ckpt.extra.get("lr_scheduler") or {}
    if mg.get("num_steps") is not None:
        warmup = _num(mg.get("lr_warmup_steps", mg.get("warmup_steps")))
        cur, peak, where = int(mg["num_steps"]), _num(mg.get("max_lr")), ckpt.rel(ckpt.root) or "."
    log = [(e["step"], e["learning_rate"]) for e in (ckpt.trainer_state or {}).get("log_history", [])
           if isinstance(e, dict) and isinstance(e.get("learning_rate"), (int, float))
           and isinstance(e.get("step"), int)]
    if warmup is None and log:
        where = "trainer_state.json"
        cur = cur if cur is not None else (ckpt.trainer_state or {}).get("global_step")
        peak = max(lr for _, lr in log)
        first_peak = next(s for s, lr in log if lr >= peak * 0.999)
        if first_peak < log[-1][0] or (base and peak >= base * 0.999):
            warmup = first_peak  # the LR reached its maximum and stayed or fell: warmup ended there
        elif base and len(log) > 1 and log[-1][1] > log[-2][1] and cur:
            slope = (log[-1][1] - log[-2][1]) / (log[-1][0] - log[-2][0])  # still rising: extrapolate linearly
            warmup = log[-1][0] + (base - log[-1][1]) / slope
            obs.find("optimizer.in_warmup", "info", f"still in warmup at step {cur} (lr {log[-1][1]:.3g} of "
                     f"{base:.3g}); linear warmup would end near step {warmup:.0f}", where, round(warmup))
    if warmup is None or not cur or warmup <= 0:
        return
    obs.fact("optimizer.warmup_steps", warmup, SOURCE, where)
    lo, hi = NEAR_WARMUP
    near = lo * warmup <= cur <= hi * warmup
    obs.fact("optimizer.near_warmup_end", near, SOURCE, f"step {cur}, warmup ends at {warmup:.0f}")
    if near:
        obs.find("optimizer.near_warmup_end", "warning", f"step {cur} is at or just after the end of LR warmup "
                 f"(step {warmup:.0f}" + (f", lr peak {peak:.3g}" if peak else "") + "): the stretch where BLOOM's "
                 "runs spiked and Adam's variance peaks (seed 002)", where, {"step": cur, "warmup_end": warmup})
