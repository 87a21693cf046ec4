"""What config.json says about MoE routing and the attention kernel (facts for moe-routing, zero-loss).

Hugging Face MoE models (Mixtral, Qwen2/3-MoE, OLMoE, ...) add the load-balancing loss to the
returned loss only when ``output_router_logits`` is true, and their shipped configs say false:
a fine-tune that keeps the config trains its router with no balancing term at all. The finding
says so when the config has experts and the flag is off or the coefficient is 0, as information:
released configs ship both (Mixtral's flag, Qwen3-Coder's 0), and the run is what decides.
"""
from __future__ import annotations

from typing import Any

EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "num_experts_per_layer")
TOP_K = ("num_experts_per_tok", "moe_topk", "top_k", "moe_top_k", "num_selected_experts")
AUX_COEF = ("router_aux_loss_coef", "aux_loss_alpha", "moe_aux_loss_coeff", "aux_loss_coef")
Z_COEF = ("router_z_loss_coef", "moe_z_loss_coeff", "z_loss_coef")
CAPACITY = ("capacity_factor", "moe_train_capacity_factor", "moe_expert_capacity_factor", "expert_capacity_factor")
ATTN = {"eager": "eager", "sdpa": "sdpa", "flash_attention_2": "flash_attention_2",
        "flash_attention_3": "flash_attention_3", "flex_attention": "flex_attention", "xformers": "xformers"}


def _first(cfg: dict, names: tuple[str, ...]) -> Any:
    for source in (cfg, cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}):
        for name in names:
            value = source.get(name)
            if value is not None:
                return value
    return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def router_facts(cfg: dict) -> dict[str, Any]:
    """model.moe.* facts (only for configs with more than one expert) and model.attn_*."""
    out: dict[str, Any] = {}
    experts = _number(_first(cfg, EXPERTS))
    if experts and experts > 1:
        out["model.moe.num_experts"] = int(experts)
        for fact, names in (("model.moe.top_k", TOP_K), ("model.moe.router_aux_loss_coef", AUX_COEF),
                            ("model.moe.router_z_loss_coef", Z_COEF), ("model.moe.capacity_factor", CAPACITY)):
            value = _number(_first(cfg, names))
            if value is not None:
                out[fact] = int(value) if fact == "model.moe.top_k" else value
        flag = _first(cfg, ("output_router_logits",))
        if isinstance(flag, bool):
            out["model.moe.output_router_logits"] = flag
    attn = _first(cfg, ("attn_implementation", "_attn_implementation"))
    if isinstance(attn, str):
        out["model.attn_implementation"] = ATTN.get(attn.lower(), "other")
    cap = _first(cfg, ("attn_logit_softcapping",))
    if "attn_logit_softcapping" in cfg or "attn_logit_softcapping" in (cfg.get("text_config") or {}):
        out["model.attn_softcapping"] = _number(cap) is not None and _number(cap) > 0
    return out


def router_finding(facts: dict[str, Any]) -> tuple[str, str] | None:
    """(severity, message) when the config trains its router without a balancing term."""
    n = facts.get("model.moe.num_experts")
    if not n:
        return None
    k = facts.get("model.moe.top_k", "?")
    coef = facts.get("model.moe.router_aux_loss_coef")
    if coef == 0:  # info: released configs ship 0 too (Qwen3-Coder-30B-A3B, Tongyi-DeepResearch-30B-A3B)
        return "info", (f"{n} experts, top-{k}, router_aux_loss_coef = 0: a fine-tune that keeps this config "
                        "trains the router without a load-balancing term; set router_aux_loss_coef (0.001 in "
                        "Qwen3-30B-A3B) and output_router_logits=True")
    if facts.get("model.moe.output_router_logits") is False:
        # info, not warning: released Mixtral / Qwen-MoE configs say false as an inference default
        return "info", (f"{n} experts, top-{k}, output_router_logits false: Hugging Face MoE models add the "
                        f"load-balancing loss (x {coef if coef is not None else '?'}) only when it is true, so a "
                        "fine-tune that keeps this config trains the router without it; load with "
                        "output_router_logits=True")
    return "info", f"{n} experts, top-{k}, aux loss coefficient {coef if coef is not None else '?'}"
