"""Config probe: what a checkpoint's config and tokenizer files say, before any tensor is read.

Reads config.json (or Megatron's saved command line), generation_config.json and the tokenizer
files (tokenizer_config.json, special_tokens_map.json, tokenizer.json, vocab.json) as plain JSON
-- no tokenizer code runs -- and the embedding shape from the safetensors header. Publishes the
``model.*`` facts the rules compute formulas from, and reports the loader's own findings
(missing ``latest`` target, skipped or refused pickles) once per checkpoint.

Sample output and how to read it::

    config.json                     config.initializer_range  warning  initializer_range 0.02 is 3.4x sqrt(2/(5*11600)) = 0.00587 (BLOOM's formula); ...
    generation_config.json          config.eos_mismatch       error    eos_token_id disagrees: config.json=[2], generation_config.json=[32000], tokenizer_config.json=[2] ('</s>')
    tokenizer_config.json           config.pad_is_eos         warning  pad token is the EOS token (id 2): collators that mask pad labels also mask every EOS ...
    model.safetensors:wte.weight    config.vocab_mismatch     error    tokenizer has 50304 ids but the embedding has 50257 rows: ids >= 50257 index out of range
    latest                          checkpoint.latest_missing error    latest points to 'global_step7000', but no such iteration folder exists

The first column is the file (and tensor) the finding is about. ``eos_mismatch`` lists every
source with its ids: a generation stack stops only on the ids of the file it reads. Ratios
against BLOOM's formula are advice for large pre-training runs; small models train fine with
the 0.02 default, so only a ratio of 3 or more is a warning.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from ..loaders.checkpoint import Checkpoint, open_checkpoint, weight_shapes
from ..observations import Observations
from . import ProbeContext
from .config_router import router_facts, router_finding

SOURCE = "probe:config"
ALIASES = {  # HF names first, then GPT-2 / T5 / Megatron spellings
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim", "model_dim"),
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "vocab_size": ("padded_vocab_size", "vocab_size", "n_vocab"),
    "initializer_range": ("initializer_range", "init_method_std", "init_std"),
    "max_positions": ("max_position_embeddings", "n_positions", "seq_length", "max_seq_len", "n_ctx"),
}
PRE_LN = {"gpt2", "gpt_neox", "gptj", "gpt_neo", "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe",
          "gemma", "gemma2", "gemma3", "bloom", "falcon", "phi", "phi3", "starcoder2", "olmo", "olmo2",
          "codegen", "mpt", "stablelm", "deepseek_v2", "deepseek_v3", "cohere", "granite"}
POST_LN = {"bert", "roberta", "electra", "distilbert", "xlm-roberta", "albert", "deberta", "deberta-v2", "ernie"}
QK_NORM = {"olmo2", "qwen3", "gemma3", "chameleon", "cohere"}  # architectures that always normalise Q/K
ATTN_OPTIONS = ("scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
                "apply_query_key_layer_scaling", "attention_softmax_in_fp32", "attn_logit_softcapping",
                "final_logit_softcapping", "query_pre_attn_scalar", "attention_multiplier", "qk_layernorm",
                "use_qk_norm", "attention_layer_norm", "clip_qkv", "softmax_scale")
EMBED_NAMES = re.compile(r"(^|\.)(wte|embed_tokens|word_embeddings|tok_embeddings|embed_in)\.weight$")
# BLOOM chronicles (seed 002): hidden/depth grows from 150 to 200 with model size (Megatron paper),
# said of models of tens of billions of parameters; smaller models are not judged.
RATIO_BAND, RATIO_MIN_PARAMS = (150, 200), 10e9
INIT_WARN, INIT_INFO = 3.0, 1.5  # initializer_range / sqrt(2/(5*hidden))


def run(ctx: ProbeContext) -> Observations:
    obs = Observations()
    for art in ctx.of_kind("hf-checkpoint", "megatron-checkpoint", "state-dict"):
        ckpt = open_checkpoint(art.path)
        obs.findings.extend(ckpt.issues)
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
    _init_range(cfg, h, where, obs)
    dtype = run_dtype(cfg, ckpt.extra)
    if dtype:
        obs.fact("model.dtype", dtype, SOURCE, where)
        if dtype == "fp16":
            obs.find("config.fp16", "info", "the run is fp16: it needs dynamic loss scaling, and values above 65504 "
                     "overflow (BLOOM-176B moved to bf16)", where, dtype)
    _norm_and_attention(cfg, where, obs)
    _router(cfg, where, obs)
    if "rope_scaling" in cfg:
        obs.fact("model.rope_scaling", bool(cfg["rope_scaling"]), SOURCE, where)
    if cfg.get("embed_layernorm") is not None or cfg.get("model_type") == "bloom":
        obs.fact("model.has_embed_layernorm", bool(cfg.get("embed_layernorm", True)), SOURCE, where)
    tok = read_tokenizer(ckpt)
    _special_tokens(ckpt, tok, obs)
    _vocab(ckpt, tok, obs)


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
    lo, hi = RATIO_BAND
    if params >= RATIO_MIN_PARAMS and not lo <= ratio <= hi:
        obs.find("config.hidden_depth_ratio", "warning",
                 f"hidden/depth = {h}/{n_layers} = {ratio:.0f}, outside the {lo}-{hi} band the Megatron paper used "
                 f"at this size (~{params / 1e9:.0f}B parameters); BLOOM-104B moved to 11600/64 = 181", where,
                 round(ratio, 2))


def _init_range(cfg: dict, h: Any, where: str, obs: Observations) -> None:
    init = pick(cfg, "initializer_range")
    if not isinstance(init, (int, float)):
        return
    obs.fact("model.initializer_range", float(init), SOURCE, where)
    if not isinstance(h, int) or h <= 0 or init <= 0:
        return
    formula = math.sqrt(2 / (5 * h))
    ratio = init / formula
    severity = "warning" if ratio >= INIT_WARN else "info" if ratio >= INIT_INFO else None
    if severity:
        obs.find("config.initializer_range", severity,
                 f"initializer_range {init:g} is {ratio:.1f}x sqrt(2/(5*{h})) = {formula:.5f} (BLOOM's formula; "
                 f"Megatron-530B used sqrt(1/(3*{h})) = {math.sqrt(1 / (3 * h)):.5f})", where,
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
        if norm == "post" and n_layers >= 24:
            obs.find("config.post_ln", "warning", f"post-LN with {n_layers} layers: deep post-LN stacks are unstable "
                     "without warmup tricks; Megatron moved BERT-style models to pre-LN to scale them", where, norm)
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


# --- tokenizer files, read as JSON --------------------------------------------------------------

def _content(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _ids(value: Any) -> set[int]:
    if isinstance(value, bool) or value is None:
        return set()
    if isinstance(value, int):
        return {value}
    if isinstance(value, (list, tuple)):
        return {v for v in value if isinstance(v, int) and not isinstance(v, bool)}
    return set()


def read_tokenizer(ckpt: Checkpoint) -> dict:
    """{'vocab': token->id, 'size': n, 'special': {file: {'eos': str, ...}}, 'chat_template': str}."""
    vocab: dict[str, int] = {}
    special: dict[str, dict[str, str]] = {}
    template = ""
    files = ckpt.tokenizer

    def load(name: str) -> Any:
        try:
            return json.loads(Path(files[name]).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    if "tokenizer.json" in files and isinstance(tj := load("tokenizer.json"), dict):
        model_vocab = (tj.get("model") or {}).get("vocab")
        if isinstance(model_vocab, dict):
            vocab.update({k: v for k, v in model_vocab.items() if isinstance(v, int)})
        elif isinstance(model_vocab, list):  # Unigram: [[piece, score], ...]
            vocab.update({p[0]: i for i, p in enumerate(model_vocab) if isinstance(p, list) and p})
        for tok in tj.get("added_tokens") or []:
            if isinstance(tok, dict) and isinstance(tok.get("id"), int):
                vocab[tok.get("content")] = tok["id"]
    for name in ("vocab.json", "added_tokens.json"):
        if name in files and isinstance(data := load(name), dict):
            vocab.update({k: v for k, v in data.items() if isinstance(v, int)})
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        data = load(name) if name in files else None
        if not isinstance(data, dict):
            continue
        for sid, tok in (data.get("added_tokens_decoder") or {}).items():
            if str(sid).isdigit() and _content(tok):
                vocab[_content(tok)] = int(sid)
        special[name] = {k: _content(data.get(f"{k}_token")) for k in ("eos", "bos", "pad", "unk")
                         if _content(data.get(f"{k}_token"))}
        template = template or (data.get("chat_template") if isinstance(data.get("chat_template"), str) else "")
    if "chat_template.jinja" in files:
        template = template or Path(files["chat_template.jinja"]).read_text(encoding="utf-8", errors="replace")
    size = max(vocab.values()) + 1 if vocab else None
    return {"vocab": vocab, "size": size, "special": special, "chat_template": template}


def _special_tokens(ckpt: Checkpoint, tok: dict, obs: Observations) -> None:
    cfg, vocab = ckpt.config or {}, tok["vocab"]
    sources: dict[str, dict[str, set[int]]] = {"eos": {}, "bos": {}, "pad": {}}
    labels: dict[str, str] = {}
    for kind in sources:
        for name, data in ((ckpt.config_source, cfg), ("generation_config.json", ckpt.generation_config or {})):
            ids = _ids(data.get(f"{kind}_token_id"))
            if ids:
                sources[kind][name] = ids
        for name, toks in tok["special"].items():
            text = toks.get(kind)
            if text is None:
                continue
            if text in vocab:
                sources[kind][name] = {vocab[text]}
                labels[f"{kind}:{name}"] = text
            elif vocab:
                obs.find("config.special_token_unknown", "warning", f"{kind}_token {text!r} in {name} is not in the "
                         "tokenizer's vocabulary or added tokens", name, text)
    for kind, severity in (("eos", "error"), ("bos", "warning"), ("pad", "warning")):
        found = sources[kind]
        if len(found) < 2:
            continue
        names = list(found)
        disjoint = any(not (found[a] & found[b]) for i, a in enumerate(names) for b in names[i + 1:])
        if kind == "eos":
            obs.fact("model.eos_mismatch", disjoint, SOURCE, ", ".join(names))
        elif kind in ("bos", "pad"):
            obs.fact(f"model.{kind}_mismatch", disjoint, SOURCE, ", ".join(names))
        if disjoint:
            detail = ", ".join(f"{n}={sorted(ids)}" + (f" ({labels[kind + ':' + n]!r})" if kind + ":" + n in labels
                                                       else "") for n, ids in found.items())
            why = " -- generation stops only on the ids of the file the serving stack reads, so text runs on" \
                if kind == "eos" else ""
            obs.find(f"config.{kind}_mismatch", severity, f"{kind}_token_id disagrees: {detail}{why}",
                     "generation_config.json" if "generation_config.json" in found else names[-1],
                     {n: sorted(ids) for n, ids in found.items()})
    eos = set().union(*sources["eos"].values()) if sources["eos"] else set()
    pad = next(iter(sources["pad"].values()), set())
    if pad and eos:
        is_eos = bool(pad & eos)
        obs.fact("model.pad_is_eos", is_eos, SOURCE, ", ".join(sources["pad"]))
        if is_eos:
            obs.find("config.pad_is_eos", "warning", f"pad token is the EOS token (id {sorted(pad & eos)[0]}): "
                     "collators that set pad labels to -100 also mask every EOS, and the model never learns to stop",
                     next(iter(sources["pad"])), sorted(pad & eos)[0])
    _chat_template_end(tok, sources["eos"], obs)


def _chat_template_end(tok: dict, eos_sources: dict[str, set[int]], obs: Observations) -> None:
    """An end-of-turn token the chat template emits but no generation file stops on (Llama-3 <|eot_id|>)."""
    template, vocab = tok["chat_template"], tok["vocab"]
    if not template or not eos_sources:
        return
    stop = eos_sources.get("generation_config.json") or set().union(*eos_sources.values())
    for text, tid in vocab.items():
        if isinstance(text, str) and re.fullmatch(r"<\|?(eot_id|im_end|end_of_turn|end|eot)\|?>|<end_of_turn>", text) \
                and text in template and tid not in stop:
            obs.find("config.eot_not_eos", "warning", f"the chat template ends turns with {text!r} (id {tid}), which is "
                     f"not among the EOS ids {sorted(stop)}: generation runs past the end of the answer",
                     "tokenizer_config.json", tid)


def embedding_rows(ckpt: Checkpoint) -> tuple[str, int] | None:
    """(tensor name, rows) of the input embedding, from headers; Megatron TP shards multiplied out."""
    shapes = weight_shapes(ckpt)
    for name, shape in shapes.items():
        if EMBED_NAMES.search(name) and len(shape) == 2:
            tp = (ckpt.config or {}).get("tensor_model_parallel_size") or 1
            return name, shape[0] * (tp if ckpt.kind == "megatron-checkpoint" else 1)
    return None


def _vocab(ckpt: Checkpoint, tok: dict, obs: Observations) -> None:
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
    specials = {f"{name}:{k}_token_id": i for name, data in ((ckpt.config_source, ckpt.config or {}),
                ("generation_config.json", ckpt.generation_config or {}))
                for k in ("eos", "bos", "pad") for i in _ids(data.get(f"{k}_token_id"))}
    out = {k: i for k, i in specials.items() if i >= rows}
    if out:
        obs.find("config.special_id_out_of_range", "error", "special token ids beyond the embedding's "
                 f"{rows} rows: " + ", ".join(f"{k}={i}" for k, i in out.items()), where, out)
    size = tok["size"]
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
