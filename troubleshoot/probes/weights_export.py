"""Is the saved model the trained model? Audits that ride on the weights probe's single pass.

* tensors of shape [0]: the placeholders a ZeRO-3 rank holds instead of its parameters, saved
  without gathering (``stage3_gather_16bit_weights_on_model_save``, ``zero_to_fp32.py``);
* a broken tie: config.json says ``tie_word_embeddings`` but ``lm_head`` differs from the input
  embedding, or says untied while ``lm_head`` is missing (it would be re-initialised on load);
* embedding rows of added / special tokens that were never trained (norm near 0, or rows exactly
  equal to one another) while the tokenizer uses them: chat markers of a base model, new tokens;
* LoRA adapters: which modules hold lora_A/B weights, whether embed_tokens / lm_head (or
  trainable token rows) were saved, and whether the folder holds an adapter only.

Only per-row fingerprints of the embedding and lm_head (row norm and row sum, two floats a row)
are kept, so memory stays at the largest tensor plus O(vocab).

Sample output::

    model.safetensors                 weights.empty_tensors     error  309 of 851 tensors have shape [0] ...
    model.safetensors:lm_head.weight  weights.tie_broken        error  config.json ties lm_head to the input
                                                                       embedding, but the saved lm_head differs ...
    model.safetensors:embed_tokens    weights.untrained_tokens  error  3 tokens the chat template uses have
                                                                       untrained embedding rows ...
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..loaders.checkpoint import Checkpoint
from ..loaders.tokenizer import added_tokens, chat_template, special_token_ids
from ..observations import Observations

SOURCE = "probe:weights"
UNTRAINED_NORM = 0.05     # a row with norm below 5 % of the median row norm carries no information
MAX_NAMES = 5
EMBEDDING = re.compile(r"(^|\.)(wte|embed_tokens|word_embeddings|tok_embeddings|embed_in)\.weight$")
LM_HEAD = re.compile(r"(^|\.)(lm_head|embed_out|output_layer)\.weight$")
LORA = re.compile(r"\.lora_[AB](?:\.[\w-]+)?\.weight$")
SAVED_EMBEDDINGS = re.compile(r"(embed_tokens|lm_head|wte|embed_out|word_embeddings|trainable_tokens)")


@dataclass
class Rows:
    """Per-row fingerprint of a [vocab, hidden] matrix: (norm, sum) of every row."""

    where: str
    norms: list[float]
    sums: list[float]

    @classmethod
    def of(cls, t, where: str) -> Rows:
        x = t.detach().double()
        return cls(where, x.norm(dim=1).tolist(), x.sum(dim=1).tolist())

    def same_as(self, other: Rows) -> bool:
        return len(self.norms) == len(other.norms) and all(
            abs(a - b) <= 1e-6 * max(1.0, abs(a)) for a, b in zip(self.norms + self.sums, other.norms + other.sums))


@dataclass
class ExportAudit:
    """Fed every tensor of one checkpoint (``see``); ``report`` publishes facts and findings."""

    tensors: int = 0
    empty: list[str] = field(default_factory=list)
    embedding: Rows | None = None
    lm_head: Rows | None = None
    lora_modules: set[str] = field(default_factory=set)
    saves_embeddings: bool = False

    def see(self, where: str, name: str, t) -> None:
        self.tensors += 1
        if t.numel() == 0:
            self.empty.append(f"{where}:{name}")
            return
        if LORA.search(name):
            self.lora_modules.add(name.rsplit(".lora_", 1)[0].rsplit(".", 1)[-1])
        elif SAVED_EMBEDDINGS.search(name):  # in an adapter: modules_to_save, save_embedding_layers, token rows
            self.saves_embeddings = True
        if t.dim() == 2 and t.is_floating_point():
            if self.embedding is None and EMBEDDING.search(name):
                self.embedding = Rows.of(t, f"{where}:{name}")
            elif self.lm_head is None and LM_HEAD.search(name):
                self.lm_head = Rows.of(t, f"{where}:{name}")

    def report(self, ckpt: Checkpoint, obs: Observations) -> None:
        adapter = ckpt.config_source.endswith("adapter_config.json")
        self._empty(ckpt, obs)
        if adapter:
            self._adapter(ckpt, obs)
            return
        self._tie(ckpt, obs)
        self._untrained(ckpt, obs)

    # -----------------------------------------------------------------------------------------
    def _empty(self, ckpt: Checkpoint, obs: Observations) -> None:
        obs.fact("weights.empty_tensors", len(self.empty), SOURCE, f"{len(self.empty)} of {self.tensors} tensors")
        if self.empty:
            obs.find("weights.empty_tensors", "error", f"{len(self.empty)} of {self.tensors} tensors have shape [0] "
                     f"(e.g. {', '.join(self.empty[:MAX_NAMES])}): these are a ZeRO-3 rank's placeholders, not the "
                     "model; save with stage3_gather_16bit_weights_on_model_save: true, or rebuild the weights with "
                     "zero_to_fp32.py from the global_step folder", ckpt.rel(ckpt.weight_files[0]), len(self.empty))

    def _tie(self, ckpt: Checkpoint, obs: Observations) -> None:
        cfg = ckpt.config or {}
        tied = cfg.get("tie_word_embeddings")
        if not isinstance(tied, bool) or self.embedding is None:
            return
        if tied and self.lm_head is not None and not self.lm_head.same_as(self.embedding):
            broken, why = True, (f"config.json ties lm_head to the input embedding, but the saved lm_head differs "
                                 f"from it ({self.lm_head.where} vs {self.embedding.where}); loading re-ties them "
                                 "and silently drops one of the two")
        elif not tied and self.lm_head is None:
            broken, why = True, ("config.json says tie_word_embeddings: false but no lm_head is saved: it will be "
                                 "randomly initialised when the model is loaded")
        else:
            broken, why = False, ""
        obs.fact("weights.tie_broken", broken, SOURCE, f"tie_word_embeddings: {tied}")
        if broken:
            obs.find("weights.tie_broken", "error", why, self.lm_head.where if self.lm_head else self.embedding.where,
                     tied)

    def _untrained(self, ckpt: Checkpoint, obs: Observations) -> None:
        """Rows of added / special tokens that look untrained, counted where the tokenizer uses them."""
        rows = self.embedding
        tokens = added_tokens(ckpt.root)
        if rows is None or not tokens:
            return
        tokens = {i: v for i, v in tokens.items() if i < len(rows.norms)}
        used = _used_ids(ckpt.root, tokens)
        median = statistics.median(rows.norms)
        if median == 0:
            return  # an all-zero (placeholder) embedding: nothing is trained, the constant-tensor audit says so
        prints: dict[tuple[float, float], list[int]] = {}
        for i in tokens:
            prints.setdefault((round(rows.norms[i], 9), round(rows.sums[i], 9)), []).append(i)
        pad = _special_ids(ckpt.root, ("pad",))
        untrained = sorted(i for i in tokens if i not in pad and rows.norms[i] < UNTRAINED_NORM * median
                           or len(prints[(round(rows.norms[i], 9), round(rows.sums[i], 9))]) > 1)
        bad = [i for i in untrained if i in used]
        obs.fact("weights.untrained_token_rows", len(bad), SOURCE,
                 f"{len(untrained)} of {len(tokens)} added tokens look untrained; {len(bad)} of them are used")
        if bad:
            names = ", ".join(f"{tokens[i][0]} ({i})" for i in bad[:MAX_NAMES])
            obs.find("weights.untrained_tokens", "error", f"{len(bad)} tokens the tokenizer or chat template uses "
                     f"have untrained embedding rows ({names}): norm near 0 or identical rows, against a median "
                     f"row norm of {median:.3g}; train them (modules_to_save / trainable_token_indices) or "
                     "initialise them at the mean of the trained rows", rows.where, [i for i in bad])
        elif untrained:
            obs.find("weights.untrained_tokens", "info", f"{len(untrained)} added tokens have untrained rows "
                     "(none is used by the chat template or as BOS/EOS/pad); do not use them unless you train them",
                     rows.where, len(untrained))

    def _adapter(self, ckpt: Checkpoint, obs: Observations) -> None:
        cfg = ckpt.config or {}
        files = {p.name for p in ckpt.root.iterdir()} if ckpt.root.is_dir() else set()
        only = not files & {"model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                            "pytorch_model.bin.index.json"}
        obs.fact("export.only_adapter_files", only, SOURCE, ckpt.config_source)
        saved = self.saves_embeddings
        obs.fact("weights.lora_saves_embeddings", saved, SOURCE, ckpt.config_source)
        obs.fact("weights.lora_target_count", len(self.lora_modules), SOURCE, ", ".join(sorted(self.lora_modules)))
        targets = ", ".join(sorted(self.lora_modules)) or "no module"
        tokens = {i: v for i, v in added_tokens(ckpt.root).items() if not v[1]}
        note = ""
        if tokens and not saved:
            note = (f"; the tokenizer beside it adds {len(tokens)} non-special tokens, whose embedding rows are not "
                    "in the adapter (add embed_tokens/lm_head to modules_to_save or use trainable_token_indices)")
        severity = "warning" if note or not self.lora_modules else "info"
        obs.find("weights.lora_adapter", severity, f"LoRA adapter (r={cfg.get('r', '?')}): lora_A/B weights for "
                 f"{targets}; {'embed_tokens / lm_head or token rows saved' if saved else 'no embedding rows saved'}"
                 f"{'; the folder holds the adapter only: load it on its base model' if only else ''}{note}",
                 ckpt.config_source, sorted(self.lora_modules))


def _used_ids(folder: Path, tokens: dict[int, tuple[str, bool]]) -> set[int]:
    """Added tokens the data will contain: named in the chat template, BOS/EOS, or added as ordinary
    (non-special) tokens by the user. The pad token is left out: its row is zero by design
    (``padding_idx``) and its positions carry no loss."""
    template = chat_template(folder)
    used = {i for i, (content, special) in tokens.items() if not special or (template and content in template)}
    used |= _special_ids(folder, ("bos", "eos"))
    return (used - _special_ids(folder, ("pad",))) & tokens.keys()



def _special_ids(folder: Path, roles: tuple[str, ...]) -> set[int]:
    """Ids any file of ``folder`` gives to these roles (bos / eos / pad)."""
    return {v for ids in special_token_ids(folder).values() for role, value in ids.items() if role.startswith(roles)
            for v in (value if isinstance(value, list) else [value] if isinstance(value, int) else [])}
