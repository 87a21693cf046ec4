"""Read the parts of the knowledge that turn text into facts: a fact's ``text:`` and ``keys:``
rules and the error-signature table ``rules/_signatures/*.yaml`` (docs/knowledge-format.md).

Only the shape is checked here; ``kb lint`` checks that the expressions compile, stay linear-time
and name registered facts (troubleshoot/evidence/patterns.py).
"""
from __future__ import annotations

from typing import Any

from . import schema
from .model import (
    FactSpec,
    KeyRule,
    KnowledgeBase,
    Signature,
    SignatureContext,
    TextRule,
)
from .schema import Located, Problem

SEVERITIES = ("error", "warning", "info")


def read_fact_rules(doc: Located, path: tuple, raw: dict, spec: FactSpec, problems: list[Problem]) -> None:
    """Fill ``spec.text`` and ``spec.keys`` from the fact's YAML mapping."""
    for i, item in enumerate(raw.get("text") or []):
        where = path + ("text", i)
        item = schema.check_fields(doc, where, item, schema.TEXT_RULE, problems)
        if item is None:
            continue
        rule = TextRule(_strings(doc, where, item, "words", problems), _strings(doc, where, item, "regex", problems),
                        item.get("set"), item.get("negated"), _trust(doc, where, item, problems), doc.line(where))
        if not rule.words and not rule.regex:
            problems.append(doc.problem(where, "a text rule needs 'words' or 'regex'"))
            continue
        spec.text.append(rule)
    for i, item in enumerate(raw.get("keys") or []):
        where = path + ("keys", i)
        item = schema.check_fields(doc, where, item, schema.KEY_RULE, problems)
        if item is None:
            continue
        keys = _strings(doc, where, item, "keys", problems)
        for j, key in enumerate(keys):
            if not schema.KEY.match(key):
                problems.append(doc.problem(where + ("keys", j), f"key '{key}' must be snake_case, dotted for a "
                                            "nested config key (flags are written without dashes: "
                                            "--clip-grad is clip_grad)"))
        values = {str(choice): [str(v) for v in spellings] for choice, spellings in (item.get("values") or {}).items()
                  if isinstance(spellings, list)}
        spec.keys.append(KeyRule(keys, item.get("set"), values, item.get("negated"), item.get("index"),
                                 doc.line(where), bool(item.get("quoted")), bool(item.get("as_text"))))


def read_signatures(doc: Located, kb: KnowledgeBase, problems: list[Problem]) -> None:
    """One signature file: a list of signatures, ids unique across the table."""
    if not isinstance(doc.data, list):
        problems.append(doc.problem((), "expected a list of signatures {id, title, match/regex, sets, sources}"))
        return
    for i, raw in enumerate(doc.data):
        path = (i,)
        raw = schema.check_fields(doc, path, raw, schema.SIGNATURE, problems)
        if raw is None:
            continue
        sid = raw.get("id")
        if not isinstance(sid, str) or not schema.SIGNATURE_ID.match(sid):
            problems.append(doc.problem(path + ("id",), f"expected a snake_case id, got {sid!r}"))
            continue
        if sid in kb.signatures:
            problems.append(doc.problem(path + ("id",),
                                        f"duplicate signature id '{sid}' (first in {kb.signatures[sid].file})"))
            continue
        severity = raw.get("severity", "error")
        if severity not in SEVERITIES:
            problems.append(doc.problem(path + ("severity",),
                                        f"expected one of {', '.join(SEVERITIES)}, got {severity!r}"))
        context = []
        for j, item in enumerate(raw.get("context") or []):
            where = path + ("context", j)
            item = schema.check_fields(doc, where, item, schema.SIGNATURE_CONTEXT, problems)
            if item is not None and "sets" in item:
                context.append(SignatureContext(_strings(doc, where, item, "words", problems),
                                                _strings(doc, where, item, "regex", problems), dict(item["sets"])))
        sig = Signature(sid, str(raw.get("title", "")), _strings(doc, path, raw, "match", problems),
                        _strings(doc, path, raw, "regex", problems), dict(raw.get("sets") or {}), severity,
                        _trust(doc, path, raw, problems), context,
                        schema.check_strings(doc, path + ("sources",), raw.get("sources"), "a source", problems),
                        doc.file, doc.line(path))
        if not sig.match and not sig.regex:
            problems.append(doc.problem(path, "a signature needs 'match' or 'regex'"))
            continue
        kb.signatures[sid] = sig


def _strings(doc: Located, path: tuple, item: dict, key: str, problems: list[Problem]) -> list[str]:
    return schema.check_strings(doc, path + (key,), item.get(key), "a string", problems)


def _trust(doc: Located, path: tuple, item: dict, problems: list[Problem]) -> float:
    value: Any = item.get("trust", 1.0)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 1:
        problems.append(doc.problem(path + ("trust",), f"expected a number in (0, 1], got {value!r}"))
        return 1.0
    return float(value)
