"""Text -> facts with the words they came from, and the error signatures pasted in it.

    >>> ex = extract(kb, "RuntimeError: CUDA error: device-side assert triggered ... "
    ...                  "Assertion `srcIndex < srcSelectDimSize` failed. I'm not using fp16, lr=3e-4")
    >>> ex.facts["train.lr"].value, ex.facts["train.lr"].span
    (0.0003, 'lr=3e-4')

Three kinds of rules (docs/knowledge-format.md, "Facts from text"): a fact's ``text`` rules
(phrases and expressions, checked for negation), its ``keys`` seen as ``key=value`` / ``--flag``
in the text, and the error signatures of rules/_signatures/. When rules of one kind disagree
about a fact ("fp16 ... bf16"), the fact stays unset rather than guessed; a signature outranks a
key, which outranks a phrase. Every expression is linear-time (patterns.py), so any paste, however
long or strange, is read in time proportional to its length.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from ..knowledge.model import FactSpec, KnowledgeBase, Signature
from ..observations import Observations
from .negation import negated
from .patterns import Pattern, table

MAX_MATCHES = 64          # matches looked at per expression (a log repeating a line 10^6 times)
MAX_COUNT = 100_000       # occurrences of a signature counted
SPAN_CHARS, LINE_CHARS = 80, 160
PRIORITY = {"signature": 3, "key": 2, "text": 1}


class Hit(NamedTuple):
    """One reading of a fact: its value, the quoted words, where they start, and how far to trust it."""

    fact: str
    value: Any
    span: str
    start: int
    end: int
    trust: float = 1.0
    kind: str = "text"    # text | key | signature


class SignatureHit(NamedTuple):
    signature: Signature
    start: int
    line: int
    count: int
    quote: str


class Extraction(NamedTuple):
    facts: dict[str, Hit]
    signatures: list[SignatureHit]
    ambiguous: dict[str, list[Hit]]  # facts left unset: the text disagrees with itself

    def observations(self, source: str, where: str = "", severity: str | None = None) -> Observations:
        """Facts (with their spans) and one finding per signature, ``where`` naming the file;
        ``severity`` overrides the signatures' own (the user's own words are no new problem)."""
        obs = Observations()
        for hit in self.facts.values():
            obs.fact(hit.fact, hit.value, source, note=f"{where}: {hit.span}" if where else "",
                     span=hit.span, trust=hit.trust)
        for s in self.signatures:
            more = f" ({s.count} times)" if s.count > 1 else ""
            obs.find(f"signature.{s.signature.id}", severity or s.signature.severity, f"{s.signature.title}{more}: {s.quote}",
                     f"{where}:{s.line}" if where else f"line {s.line}",
                     {"line": s.line, "count": s.count, "sets": s.signature.sets})
        return obs


def extract(kb: KnowledgeBase, text: str) -> Extraction:
    """Read every fact and signature the knowledge can find in ``text``."""
    lowered = text.lower()
    hits: list[Hit] = []
    found: dict[str, SignatureHit] = {}
    contexts: list[Pattern] = []
    for pattern in table(kb):
        if pattern.literals and not any(lit in lowered for lit in pattern.literals):
            continue
        if pattern.kind == "signature":
            _signature(kb, pattern, text, found)
        elif pattern.kind == "context":
            if pattern.compiled.search(text):
                contexts.append(pattern)
        else:
            hits.extend(_facts(kb.facts[pattern.fact], pattern, text))
    for sig_hit in sorted(found.values(), key=lambda s: s.start):
        hits.extend(_signature_facts(kb, sig_hit, [c for c in contexts if c.signature == sig_hit.signature.id]))
    out = Extraction({}, sorted(found.values(), key=lambda s: s.start), {})
    _resolve(hits, out)
    return out


def _facts(spec: FactSpec, pattern: Pattern, text: str) -> list[Hit]:
    out = []
    for n, match in enumerate(pattern.compiled.finditer(text)):
        if n >= MAX_MATCHES:
            break
        if pattern.kind == "key" and _in_metrics_line(text, match.start()):
            continue  # {'loss': 2.1, 'learning_rate': 1.9e-05}: the value at that step, not the setting
        value = _value(spec, pattern, match)
        if value is not None:
            out.append(Hit(spec.name, value, _span(match.group(0)), match.start(), match.end(), pattern.trust,
                           pattern.kind))
    return out


def _in_metrics_line(text: str, start: int) -> bool:
    line = text[text.rfind("\n", 0, start) + 1:start]
    return line.lstrip().startswith("{") and ("loss'" in line or 'loss"' in line)


def _value(spec: FactSpec, pattern: Pattern, match) -> Any:
    """The value a match sets, or None when it sets nothing (negated, or not a value of the fact)."""
    groups = match.groupdict()
    off = groups.get("flag") is not None and groups["flag"].lower() in ("false", "no", "off", "0")
    if pattern.kind == "text" and negated(match.string, match.start(), match.end()):
        off = True
    if off:
        raw = pattern.negated
    elif pattern.set is not None:
        raw = pattern.set
    else:
        raw = groups.get("value")
        if raw is not None and pattern.values:
            raw = dict(pattern.values).get(raw.lower().strip("'\""))
    if raw is None:
        return None
    try:
        return spec.parse(raw)
    except ValueError:
        return None


def _signature(kb: KnowledgeBase, pattern: Pattern, text: str, found: dict[str, SignatureHit]) -> None:
    first = pattern.compiled.search(text)
    if first is None:
        return
    count = 1
    for count, _ in enumerate(pattern.compiled.finditer(text, first.end()), 2):
        if count >= MAX_COUNT:
            break
    held = found.get(pattern.signature)
    if held is not None and held.start <= first.start():
        found[pattern.signature] = held._replace(count=max(held.count, count))
        return
    line_start = text.rfind("\n", 0, first.start()) + 1
    line_end = text.find("\n", first.end())
    quote = text[line_start:line_end if line_end >= 0 else len(text)].strip()
    found[pattern.signature] = SignatureHit(kb.signatures[pattern.signature], first.start(),
                                            text.count("\n", 0, first.start()) + 1, count, _span(quote, LINE_CHARS))


def _signature_facts(kb: KnowledgeBase, hit: SignatureHit, contexts: list[Pattern]) -> list[Hit]:
    sets = dict(hit.signature.sets)
    for ctx in reversed(contexts):  # the first listed context wins for a fact
        sets.update(ctx.sets)
    out = []
    for name, raw in sets.items():
        spec = kb.facts.get(name)
        try:
            value = spec.parse(raw) if spec else None
        except ValueError:
            value = None
        if value is not None:
            out.append(Hit(name, value, hit.quote, hit.start, hit.start, hit.signature.trust, "signature"))
    return out


def _resolve(hits: list[Hit], out: Extraction) -> None:
    """One value per fact: the strongest kind of rule that read it, unless its readings disagree."""
    by_fact: dict[str, list[Hit]] = {}
    for hit in hits:
        by_fact.setdefault(hit.fact, []).append(hit)
    for name, group in by_fact.items():
        best = max(PRIORITY[h.kind] for h in group)
        top = sorted((h for h in group if PRIORITY[h.kind] == best), key=lambda h: h.start)
        top = [h for h in top if not any(o.start <= h.start and h.end <= o.end and o.end - o.start > h.end - h.start
                                         for o in top)]  # "pretraining" inside "continued pretraining"
        if len({repr(h.value) for h in top}) > 1:
            out.ambiguous[name] = top
            continue
        out.facts[name] = max(top, key=lambda h: h.trust) if len(top) > 1 else top[0]


def _span(text: str, limit: int = SPAN_CHARS) -> str:
    text = " ".join(text[:limit * 4].split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
