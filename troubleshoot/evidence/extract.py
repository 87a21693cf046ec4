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

import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from ..knowledge.model import FactSpec, KnowledgeBase, Signature
from ..observations import Observations
from .negation import negated
from .patterns import Pattern, table

MAX_MATCHES = 64          # matches looked at per expression (a log repeating a line 10^6 times)
MAX_COUNT = 100_000       # occurrences of a signature counted
SPAN_CHARS, LINE_CHARS = 80, 160
WINDOW_GAP = 512          # search windows closer than this are merged
MAX_LINE = 1 << 16        # characters of one line read, as in the log reader (docs/resource-policy.md)
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
            obs.find(f"signature.{s.signature.id}", severity or s.signature.severity,
                     f"{s.signature.title}{more}: {s.quote}",
                     f"{where}:{s.line}" if where else f"line {s.line}",
                     {"line": s.line, "count": s.count, "sets": s.signature.sets})
        return obs


def extract(kb: KnowledgeBase, text: str) -> Extraction:
    """Read every fact and signature the knowledge can find in ``text``."""
    text = clip_lines(text)
    lowered = text.replace("\u0130", "i").lower()  # "İ" lower-cases to two characters: offsets would shift
    if len(lowered) != len(text):  # another such character (a newer Unicode): no literal index then
        lowered = ""
    hits: list[Hit] = []
    found: dict[str, SignatureHit] = {}
    contexts: list[Pattern] = []
    present: dict[str, bool] = {}  # literal -> occurs in the text (patterns share literals)

    counts: dict[str, int] = {}  # literal -> how often it occurs (for the search windows)

    def occurs(literal: str) -> bool:
        if literal not in present:
            present[literal] = literal in lowered
        return present[literal]

    def count(literal: str) -> int:
        if literal not in counts:
            counts[literal] = lowered.count(literal) if occurs(literal) else 0
        return counts[literal]

    for pattern in table(kb):
        if lowered and (pattern.literals and not any(map(occurs, pattern.literals))
                        or not all(any(map(occurs, group)) for group in pattern.requires)):
            continue
        matches = _matches(pattern, text, lowered, count)
        if pattern.kind == "signature":
            _signature(kb, pattern, text, matches, found)
        elif pattern.kind == "context":
            if next(matches, None) is not None:
                contexts.append(pattern)
        else:
            hits.extend(_facts(kb.facts[pattern.fact], pattern, text, matches))
    for sig_hit in sorted(found.values(), key=lambda s: s.start):
        hits.extend(_signature_facts(kb, sig_hit, [c for c in contexts if c.signature == sig_hit.signature.id]))
    out = Extraction({}, sorted(found.values(), key=lambda s: s.start), {})
    _resolve(_this_run(kb, hits), out)
    return out


def clip_lines(text: str, limit: int = MAX_LINE) -> str:
    """Each line cut to its first ``limit`` characters: a 10 MB line dense with a literal ("loss
    loss ...") would otherwise be one search window scanned by every expression holding it."""
    if len(text) <= limit:
        return text
    lines = text.splitlines(keepends=True)
    if max(map(len, lines)) <= limit + 2:
        return text
    return "".join(line if len(line) <= limit else line[:limit] + _line_end(line) for line in lines)


def _line_end(line: str) -> str:
    return line[-2:] if line.endswith("\r\n") else line[-1:] if line[-1:].isspace() else ""


def _matches(pattern: Pattern, text: str, lowered: str, count: Callable[[str], int]) -> Iterator[re.Match]:
    """The pattern's matches, searched only around the occurrences of its literals: a match holds
    one of them and is at most ``width`` long, so text farther away cannot match (a 10 MB log is
    then read at ``str.find`` speed, not at the regex engine's). A match also holds a member of
    each of its required groups, so the group that occurs least anchors the windows: "overflow"
    on every line of a DeepSpeed log is no reason to try "... it recovered" at each of them."""
    if not (lowered and pattern.literals and pattern.width):
        yield from pattern.compiled.finditer(text)
        return
    reach = pattern.width + 8  # + look-behind / look-ahead context
    anchors = min([pattern.literals, *pattern.requires], key=lambda group: sum(map(count, group)))
    starts = sorted({i for lit in anchors for i in _occurrences(lowered, lit)})
    done = 0
    for start, end in _windows(starts, reach, len(text)):
        for match in pattern.compiled.finditer(text, max(start, done), end):
            done = match.end()
            yield match


def _occurrences(lowered: str, literal: str) -> Iterator[int]:
    i = lowered.find(literal)
    while i >= 0:
        yield i
        i = lowered.find(literal, i + 1)


def _windows(starts: list[int], reach: int, size: int) -> Iterator[tuple[int, int]]:
    """[start - reach, start + reach] windows, merged when close (one long scan beats many calls)."""
    low = high = None
    for i in starts:
        if high is not None and i - reach <= high + WINDOW_GAP:
            high = min(size, i + reach)
            continue
        if high is not None:
            yield low, high
        low, high = max(0, i - reach), min(size, i + reach)
    if high is not None:
        yield low, high


def _facts(spec: FactSpec, pattern: Pattern, text: str, matches: Iterator[re.Match]) -> list[Hit]:
    out = []
    for n, match in enumerate(matches):
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


def _signature(kb: KnowledgeBase, pattern: Pattern, text: str, matches: Iterator[re.Match],
               found: dict[str, SignatureHit]) -> None:
    first = next(matches, None)
    if first is None:
        return
    count = 1
    for count, _ in enumerate(matches, 2):
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


def _this_run(kb: KnowledgeBase, hits: list[Hit]) -> list[Hit]:
    """The readings that describe the user's run: a setting named inside the words of an
    ``other_run`` fact ("switching to fp32 fixed it", "换成bf16就好了") is the run that worked,
    not this one, so "bf16 nan, switching to fp32 fixed it" reads bf16, not a disagreement."""
    frames = [h for h in hits if kb.facts[h.fact].other_run]
    return [h for h in hits if h.kind == "signature" or kb.facts[h.fact].other_run
            or not any(f.start <= h.start and h.end <= f.end for f in frames)]


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
