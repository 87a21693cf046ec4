"""Settings (a key path and its value, from a config, a launch command or a script's keyword
arguments) -> facts, through the knowledge's key rules (``keys:`` of a fact).

A key matches a path equal to it or ending in it at a dot (``lr`` matches ``optimizer.lr``,
``zero_optimization.stage`` matches itself); when keys of several facts match one path, the
most specific (most segments) wins, so ``from_pretrained.dtype`` is the model's dtype while a
torchtune ``dtype`` is the training precision. The last setting of a fact wins, as on a command
line. ``"auto"`` (DeepSpeed filled in by the HF Trainer) and unparsable values set nothing. The
value of an ``as_text`` rule's setting is read with the fact's text rules, as words in a report are
(``model_name_or_path: Qwen/Qwen2-7B`` names a family released in bf16).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..knowledge.model import FactSpec, KeyRule, KnowledgeBase
from .extract import Hit, extract

TRUE = ("true", "yes", "on", "1")
FALSE = ("false", "no", "off", "0", "none", "disabled")


def key_index(kb: KnowledgeBase) -> dict[str, list[tuple[FactSpec, KeyRule]]]:
    """key -> the (fact, rule) pairs it belongs to (quoted rules read pasted JSON only, no setting)."""
    index: dict[str, list[tuple[FactSpec, KeyRule]]] = {}
    for spec in kb.facts.values():
        for rule in spec.keys:
            if rule.quoted:
                continue
            for key in rule.keys:
                index.setdefault(key, []).append((spec, rule))
    return index


def facts_from_settings(kb: KnowledgeBase, settings: Iterable) -> dict[str, Hit]:
    """One Hit per fact (the last setting that gives it a value); ``settings`` are
    loaders.setup.Setting rows (path, value, line, quote)."""
    index = key_index(kb)
    out: dict[str, Hit] = {}
    for setting in settings:
        for spec, rule in _matching(index, setting.path):
            if rule.as_text:
                value, trust = _as_text(kb, spec, setting.value)
            else:
                value, trust = convert(spec, rule, setting.value), 1.0
            if value is not None:
                out[spec.name] = Hit(spec.name, value, setting.quote or f"{setting.path}={setting.value}",
                                     setting.line, setting.line, trust, "key")
    return out


def _as_text(kb: KnowledgeBase, spec: FactSpec, raw: Any) -> tuple[Any, float]:
    """The fact's value (and trust) as its text rules read a setting's text value, or (None, 1)."""
    hit = extract(kb, raw).facts.get(spec.name) if isinstance(raw, str) else None
    return (hit.value, hit.trust) if hit is not None and hit.kind == "text" else (None, 1.0)


def _matching(index: dict, path: str) -> list[tuple[FactSpec, KeyRule]]:
    parts = path.split(".")
    for n in range(len(parts), 0, -1):  # the most specific suffix first
        found = index.get(".".join(parts[-n:]))
        if found:
            return found
    return []


def convert(spec: FactSpec, rule: KeyRule, raw: Any) -> Any:
    """The fact's value for one raw setting value, or None when it sets nothing."""
    if rule.index is not None:
        if not isinstance(raw, (list, tuple)) or len(raw) <= rule.index:
            return None
        raw = raw[rule.index]
    if isinstance(raw, str) and raw.strip().lower() in ("auto", "", "null"):
        return None
    if isinstance(raw, (dict, list, tuple)) or raw is None:
        return None
    if rule.set is not None or spec.type == "bool":
        state = _truth(raw)
        if state is None:
            return None
        if state:
            chosen = True if rule.set is None else rule.set
        else:
            plain_off = rule.set is None and rule.negated is None and spec.type == "bool"
            chosen = False if plain_off else rule.negated
        return _parse(spec, chosen)
    if rule.values:
        text = str(raw).strip().strip("'\"").lower()
        for choice, spellings in rule.values.items():
            if text == choice.lower() or text in (s.lower() for s in spellings):
                return _parse(spec, choice)
        return None
    return _parse(spec, raw)


def _truth(raw: Any) -> bool | None:
    """A switch's state. A number counts as on unless it is 0, written as a number (a YAML config's
    ``quantization_bit: 4``) or as text (a command line's ``--quantization_bit 4``) alike."""
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, (int, float)):
        return raw != 0
    text = str(raw).strip().lower()
    if text in TRUE or text in FALSE:
        return text in TRUE
    try:
        return float(text) != 0
    except ValueError:
        return None


def _parse(spec: FactSpec, value: Any) -> Any:
    if value is None:
        return None
    if spec.type == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    try:
        return spec.parse(value)
    except ValueError:
        return None
