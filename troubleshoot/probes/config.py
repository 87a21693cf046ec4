"""Config probe: what a checkpoint's config and tokenizer files say, before any tensor is read.

Reads config.json (or Megatron's saved command line), generation_config.json and the tokenizer
files (through ``loaders/tokenizer.py``: plain JSON, no tokenizer code runs) and the embedding
shape from the safetensors header. Publishes the
``model.*`` facts the rules compute formulas from.

Sample output and how to read it::

    model_optim_rng.pt:args         config.initializer_range  warning  initializer_range 0.02 is 3.4x
            sqrt(2/(5*11600)) = 0.00587 (BLOOM's formula); ...
    generation_config.json          config.eos_mismatch       error    eos_token_id disagrees: config.json=[2],
            generation_config.json=[32000], tokenizer_config.json=[2] ('</s>')
    tokenizer_config.json           config.pad_is_eos         info     pad token is the EOS token (id 2): harmless
            in itself, but a collator that masks pad labels ...
    model.safetensors:wte.weight    config.vocab_mismatch     error    tokenizer has 50304 ids but the embedding has
            50257 rows: ids >= 50257 index out of range
    latest                          checkpoint.latest_missing error    latest points to 'global_step7000',
            but no such iteration folder exists

The first column is the file (and tensor) the finding is about. ``eos_mismatch`` lists every
source with its ids: a generation stack stops only on the ids of the file it reads. Ratios
against BLOOM's formula are advice for pre-training from scratch: a ratio of 3 or more is a
warning in Megatron training arguments and a note in an HF config (docs/calibration.md).
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ..loaders.checkpoint import Checkpoint, open_checkpoint, weight_shapes
from ..loaders.tokenizer import config_declared, eos_not_stopped, tokenizer_declared, vocab_sizes
from ..observations import Observations
from .config_router import router_facts, router_finding
from .context import ProbeContext

SOURCE = "probe:config"
# Every fact this family can publish (kb lint checks them against the rules' facts).
PUBLISHES = (
    "model.hidden_size", "model.num_layers", "model.num_heads", "model.vocab_size",
    "model.max_positions", "model.hidden_depth_ratio", "model.params_estimate",
    "model.initializer_range", "model.pretrained_dtype", "model.norm_position", "model.attn_scaled",
    "model.qk_layernorm", "model.rope_scaling", "model.has_embed_layernorm", "model.eos_mismatch",
    "model.bos_mismatch", "model.pad_mismatch", "model.pad_is_eos", "model.embedding_rows",
    "model.tokenizer_size", "model.vocab_mismatch",
    # config_router
    "model.moe.num_experts", "model.moe.top_k", "model.moe.router_aux_loss_coef", "model.moe.router_z_loss_coef",
    "model.moe.capacity_factor", "model.moe.output_router_logits", "model.attn_implementation",
    "model.attn_softcapping",
)
ALIASES = {  # HF names first, then GPT-2 / T5 / Megatron spellings
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim", "model_dim"),
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "vocab_size": ("padded_vocab_size", "vocab_size", "n_vocab"),
    "initializer_range": ("initializer_range", "init_method_std", "init_std"),
    "max_positions": ("max_position_embeddings", "n_positions", "seq_length", "max_seq_len", "n_ctx"),
}
PRE_LN = {"gpt2", "gpt_neox", "gptj", "gpt_neo", "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe",
          "qwen3_moe", "qwen2_vl", "qwen2_5_vl", "gemma", "gemma2", "gemma3", "gemma3_text", "bloom", "falcon", "phi",
          "phi3", "starcoder2", "olmo", "olmo2", "olmoe", "codegen", "mpt", "stablelm", "deepseek", "deepseek_v2",
          "deepseek_v3", "cohere", "granite"}
POST_LN = {"bert", "roberta", "electra", "distilbert", "xlm-roberta", "albert", "deberta", "deberta-v2", "ernie"}
# architectures that always normalise Q/K
QK_NORM = {"olmo2", "olmoe", "qwen3", "qwen3_moe", "gemma3", "gemma3_text", "chameleon", "cohere"}
ATTN_OPTIONS = ("scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
                "apply_query_key_layer_scaling", "attention_softmax_in_fp32", "attn_logit_softcapping",
                "final_logit_softcapping", "query_pre_attn_scalar", "attention_multiplier", "qk_layernorm",
                "use_qk_norm", "attention_layer_norm", "clip_qkv", "softmax_scale")
EMBED_NAMES = re.compile(r"(^|\.)(wte|embed_tokens|word_embeddings|tok_embeddings|embed_in)\.weight$")
# Hidden/depth: BLOOM's failing 104B first launch had 11600/32 = 362; the models that trained fine
# span 102 (Llama-2-70B, Qwen2.5-72B) to 205 (BLOOM-176B), so only a ratio above 300 is flagged
# (docs/calibration.md; the same 300 as rules/bad-init.yaml).
RATIO_MAX, RATIO_MIN_PARAMS = 300, 10e9
# initializer_range / sqrt(2/(5*hidden)): OLMo 2 trained fine at 2.26 (0.02 at 5120), BLOOM's 104B
# diverged at 3.4 (0.02 at 11600); the rules use the same 3 (docs/calibration.md). An HF config's
# value only seeds newly added modules, so it gets a warning only in Megatron training arguments
# or when it is absurd for any width (0.5 and up, as in rules/bad-init.yaml; EasyLM once shipped 1.0).
INIT_WARN, INIT_ABSURD = 3.0, 0.5
# BERT-Large (24 layers, post-LN) trained fine; Megatron-LM (arXiv:1909.08053) needed pre-LN beyond it.
POST_LN_MAX_LAYERS = 24


def run(ctx: ProbeContext) -> Observations:
    obs = Observations()
    for art in ctx.of_kind("hf-checkpoint", "megatron-checkpoint", "state-dict"):
        ckpt = open_checkpoint(art.path)
        if ckpt.config:
            probe_config(ckpt, obs)
    return obs


def pick(cfg: dict, key: str) -> Any:
    """First non-null value among the aliases of ``key`` (also inside text_config)."""
    for source in (cfg, cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}):
        for name in ALIASES.get(key, (key,)):
            value = source.get(name)
            if value is not None and not isinstance(value, bool):
                return value
    return None


def run_dtype(cfg: dict, extra: dict | None = None) -> str | None:
    """fp16 / bf16 / fp32 from torch_dtype or dtype (HF), fp16/bf16 flags (Megatron), ds_config."""
    if cfg.get("fp16") is True:
        return "fp16"
    if cfg.get("bf16") is True:
        return "bf16"
    ds = (extra or {}).get("ds_config") or {}
    for key, name in (("fp16", "fp16"), ("bf16", "bf16")):
        if isinstance(ds.get(key), dict) and ds[key].get("enabled") is True:
            return name
    text = str(cfg.get("torch_dtype") or cfg.get("dtype") or cfg.get("params_dtype") or "").lower()
    for needle, name in (("bfloat16", "bf16"), ("float16", "fp16"), ("half", "fp16"), ("float32", "fp32")):
        if needle in text:
            return name
    return None


def probe_config(ckpt: Checkpoint, obs: Observations) -> None:
    cfg, where = ckpt.config, ckpt.config_source
    h, n_layers, heads = pick(cfg, "hidden_size"), pick(cfg, "num_layers"), pick(cfg, "num_heads")
    for fact, value in (("model.hidden_size", h), ("model.num_layers", n_layers), ("model.num_heads", heads),
                        ("model.vocab_size", pick(cfg, "vocab_size")),
                        ("model.max_positions", pick(cfg, "max_positions"))):
        if isinstance(value, (int, float)):
            obs.fact(fact, value, SOURCE, where)
    _shape(cfg, h, n_layers, where, obs)
    _init_range(cfg, h, where, obs, ckpt.kind == "megatron-checkpoint")
    dtype = run_dtype(cfg, ckpt.extra)
    if dtype:
        obs.fact("model.pretrained_dtype", dtype, SOURCE, where)
        if dtype == "fp16":
            obs.find("config.fp16", "info", "the run is fp16: it needs dynamic loss scaling, and values above 65504 "
                     "overflow (BLOOM-176B moved to bf16)", where, dtype)
    _norm_and_attention(cfg, where, obs)
    _router(cfg, where, obs)
    if "rope_scaling" in cfg:
        obs.fact("model.rope_scaling", bool(cfg["rope_scaling"]), SOURCE, where)
    if cfg.get("embed_layernorm") is not None or cfg.get("model_type") == "bloom":
        obs.fact("model.has_embed_layernorm", bool(cfg.get("embed_layernorm", True)), SOURCE, where)
    folder = tokenizer_folder(ckpt)
    tok_size = vocab_sizes(folder).get("tokenizer") if folder else None
    _special_tokens(ckpt, tok_size, obs)
    _vocab(ckpt, tok_size, obs)


def _router(cfg: dict, where: str, obs: Observations) -> None:
    """MoE router settings and the attention kernel (config_router)."""
    facts = router_facts(cfg)
    for name, value in facts.items():
        obs.fact(name, value, SOURCE, where)
    found = router_finding(facts)
    if found:
        obs.find("config.moe_router", found[0], found[1], where,
                 {k.removeprefix("model.moe."): v for k, v in facts.items() if k.startswith("model.moe.")})


def _shape(cfg: dict, h: Any, n_layers: Any, where: str, obs: Observations) -> None:
    if not (isinstance(h, int) and isinstance(n_layers, int) and n_layers > 0):
        return
    ratio = h / n_layers
    params = 12 * n_layers * h * h + (pick(cfg, "vocab_size") or 0) * h
    obs.fact("model.hidden_depth_ratio", round(ratio, 2), SOURCE, where)
    obs.fact("model.params_estimate", float(params), SOURCE, "12*layers*hidden^2 + vocab*hidden")
    if params >= RATIO_MIN_PARAMS and ratio > RATIO_MAX:
        obs.find("config.hidden_depth_ratio", "warning",
                 f"hidden/depth = {h}/{n_layers} = {ratio:.0f}, above {RATIO_MAX}: open models of this size "
                 f"(~{params / 1e9:.0f}B parameters) sit between 100 and 210; BLOOM's 104B moved from 11600/32 = 362 "
                 "to 11600/64 = 181", where, round(ratio, 2))


def _init_range(cfg: dict, h: Any, where: str, obs: Observations, training_args: bool) -> None:
    init = pick(cfg, "initializer_range")
    if not isinstance(init, (int, float)):
        return
    obs.fact("model.initializer_range", float(init), SOURCE, where)
    if not isinstance(h, int) or h <= 0 or init <= 0:
        return
    formula = math.sqrt(2 / (5 * h))
    ratio = init / formula
    if ratio >= INIT_WARN:
        scope = "" if training_args else "; it only matters when training from scratch (a pretrained model's " \
            "config value seeds newly added modules only)"
        obs.find("config.initializer_range", "warning" if training_args or init >= INIT_ABSURD else "info",
                 f"initializer_range {init:g} is {ratio:.1f}x sqrt(2/(5*{h})) = {formula:.5f} (BLOOM's formula; "
                 f"Megatron-530B used sqrt(1/(3*{h})) = {math.sqrt(1 / (3 * h)):.5f}){scope}", where,
                 {"initializer_range": init, "formula": round(formula, 6), "ratio": round(ratio, 2)})


def _norm_and_attention(cfg: dict, where: str, obs: Observations) -> None:
    mtype = str(cfg.get("model_type") or "")
    norm = None
    if "do_layer_norm_before" in cfg:  # OPT
        norm = "pre" if cfg["do_layer_norm_before"] else "post"
    elif "apply_residual_post_layernorm" in cfg:  # LiBai (seed 000)
        norm = "post" if cfg["apply_residual_post_layernorm"] else "pre"
    elif "normalize_before" in cfg:
        norm = "pre" if cfg["normalize_before"] else "post"
    elif mtype in PRE_LN or "num_layers" in cfg and "hidden_size" in cfg and "ffn_hidden_size" in cfg:
        norm = "pre"  # Megatron's transformer is pre-LN
    elif mtype in POST_LN:
        norm = "post"
    if norm:
        obs.fact("model.norm_position", norm, SOURCE, where)
        n_layers = pick(cfg, "num_layers") or 0
        if norm == "post" and n_layers > POST_LN_MAX_LAYERS:
            obs.find("config.post_ln", "warning", f"post-LN with {n_layers} layers: beyond BERT-Large's "
                     f"{POST_LN_MAX_LAYERS}, post-LN stacks are unstable without warmup tricks; Megatron moved "
                     "BERT-style models to pre-LN to scale them", where, norm)
    options = {k: cfg[k] for k in ATTN_OPTIONS if k in cfg and cfg[k] is not None}
    if options:
        obs.find("config.attention_options", "info", "attention scaling options: " + ", ".join(
            f"{k}={v}" for k, v in options.items()), where, options)
    if options.get("scale_attn_weights") is False:
        obs.fact("model.attn_scaled", False, SOURCE, where)
        obs.find("config.attn_unscaled", "warning", "scale_attn_weights=false: attention logits are not divided "
                 "by sqrt(head_dim), so they grow with the head size and saturate the softmax", where, False)
    elif "scale_attn_weights" in options:
        obs.fact("model.attn_scaled", True, SOURCE, where)
    qk = next((bool(cfg[k]) for k in ("qk_layernorm", "use_qk_norm", "attention_layer_norm") if k in cfg), None)
    if qk is None and mtype in QK_NORM:
        qk = True
    if qk is not None:
        obs.fact("model.qk_layernorm", qk, SOURCE, where)


# --- special tokens, as every file names them (read by loaders/tokenizer.py) --------------------

def tokenizer_folder(ckpt: Checkpoint) -> Path | None:
    return next(iter(ckpt.tokenizer.values())).parent if ckpt.tokenizer else None


def _special_tokens(ckpt: Checkpoint, tok_size: int | None, obs: Observations) -> None:
    folder = tokenizer_folder(ckpt)
    declared = (config_declared(ckpt.config_source, ckpt.config)
                + config_declared("generation_config.json", ckpt.generation_config)
                + (tokenizer_declared(folder) if folder else []))
    sources: dict[str, dict[str, list[int]]] = {"eos": {}, "bos": {}, "pad": {}}
    labels: dict[tuple[str, str], str] = {}
    for d in declared:
        if d.ids:
            sources[d.role][d.source] = d.ids
            if d.text:
                labels[d.role, d.source] = d.text
        elif d.text is not None and tok_size:
            obs.find("config.special_token_unknown", "warning", f"{d.role}_token {d.text!r} in {d.source} is not "
                     "in the tokenizer's vocabulary or added tokens", d.source, d.text)
    _eos(sources["eos"], labels, obs)
    for kind, fact, finding in (("bos", "model.bos_mismatch", "config.bos_mismatch"),
                                ("pad", "model.pad_mismatch", "config.pad_mismatch")):
        found = sources[kind]
        if len(found) < 2:
            continue
        names = list(found)
        disjoint = any(not set(found[a]) & set(found[b]) for i, a in enumerate(names) for b in names[i + 1:])
        obs.fact(fact, disjoint, SOURCE, ", ".join(names))
        if disjoint:
            obs.find(finding, "warning", f"{kind}_token_id disagrees: {_listing(found, kind, labels)}",
                     "generation_config.json" if "generation_config.json" in found else names[-1],
                     {n: sorted(ids) for n, ids in found.items()})
    eos = {i for ids in sources["eos"].values() for i in ids}
    pad = set(next(iter(sources["pad"].values()), []))
    if pad and eos:
        is_eos = bool(pad & eos)
        obs.fact("model.pad_is_eos", is_eos, SOURCE, ", ".join(sources["pad"]))
        if is_eos:
            obs.find("config.pad_is_eos", "info", f"pad token is the EOS token (id {sorted(pad & eos)[0]}): "
                     "harmless in itself (many released models ship so), but a collator that sets pad labels to -100 "
                     "also masks every EOS and the model never learns to stop; `llmfix probe batch.pt` checks that",
                     next(iter(sources["pad"])), sorted(pad & eos)[0])


def _listing(found: dict[str, list[int]], kind: str, labels: dict) -> str:
    return ", ".join(f"{n}={sorted(ids)}" + (f" ({labels[kind, n]!r})" if (kind, n) in labels else "")
                     for n, ids in found.items())


def _eos(found: dict[str, list[int]], labels: dict, obs: Observations) -> None:
    """The one EOS check: every end token a file names (the chat template's end-of-turn marker
    included, e.g. Llama 3's <|eot_id|>) must be one that generation stops on."""
    if len(found) < 2:
        return
    missing, stops = eos_not_stopped(found)
    obs.fact("model.eos_mismatch", bool(missing), SOURCE, ", ".join(found))
    if not missing:
        return
    only_template = all(i in found.get("chat_template", ()) for i in missing)
    stop_text = (f"generation stops only on {stops}" if stops else "no config names the EOS to stop on")
    obs.find("config.eos_mismatch", "warning" if only_template else "error",
             f"eos_token_id disagrees: {_listing(found, 'eos', labels)} -- {stop_text}, so text that ends with "
             f"{missing} runs on (list every end token in generation_config.json eos_token_id)",
             "generation_config.json" if "generation_config.json" in found else list(found)[-1],
             {n: sorted(ids) for n, ids in found.items()})


def embedding_rows(ckpt: Checkpoint) -> tuple[str, int] | None:
    """(tensor name, rows) of the input embedding, from headers; Megatron TP shards multiplied out."""
    shapes = weight_shapes(ckpt)
    for name, shape in shapes.items():
        if EMBED_NAMES.search(name) and len(shape) == 2:
            tp = (ckpt.config or {}).get("tensor_model_parallel_size") or 1
            return name, shape[0] * (tp if ckpt.kind == "megatron-checkpoint" else 1)
    return None


def _vocab(ckpt: Checkpoint, size: int | None, obs: Observations) -> None:
    if not ckpt.weight_files:
        return
    emb = embedding_rows(ckpt)
    if emb is None:
        return
    name, rows = emb
    where = f"{ckpt.rel(ckpt.weight_files[0])}:{name}" if len(ckpt.weight_files) == 1 else name
    obs.fact("model.embedding_rows", rows, SOURCE, where)
    cfg_vocab = pick(ckpt.config or {}, "vocab_size")
    if isinstance(cfg_vocab, int) and cfg_vocab != rows:
        obs.find("config.vocab_size_rows", "error", f"config vocab_size {cfg_vocab} but the embedding has {rows} rows: "
                 "the weights do not match the config (resize_token_embeddings not saved?)", where,
                 {"vocab_size": cfg_vocab, "rows": rows})
    specials = {f"{d.source}:{d.role}_token_id": i for d in config_declared(ckpt.config_source, ckpt.config)
                + config_declared("generation_config.json", ckpt.generation_config) for i in d.ids}
    out = {k: i for k, i in specials.items() if i >= rows}
    if out:
        obs.find("config.special_id_out_of_range", "error", "special token ids beyond the embedding's "
                 f"{rows} rows: " + ", ".join(f"{k}={i}" for k, i in out.items()), where, out)
    if size is None:
        if out:
            obs.fact("model.vocab_mismatch", True, SOURCE, where)
        return
    obs.fact("model.tokenizer_size", size, SOURCE, "tokenizer files")
    obs.fact("model.vocab_mismatch", size > rows or bool(out), SOURCE, where)
    if size > rows:
        obs.find("config.vocab_mismatch", "error", f"tokenizer has {size} ids but the embedding has {rows} rows: ids "
                 f">= {rows} index out of range (call model.resize_token_embeddings(len(tokenizer)))", where,
                 {"tokenizer_size": size, "embedding_rows": rows})
