"""The knowledge's text rules, key rules and error signatures as one table of regular expressions.

Built once per knowledge version and cached beside the parsed knowledge
(``knowledge.cache.memo``); each expression is compiled only when its *prefilter* (literals the
expression cannot match without) occurs in the text, so ``llmfix ask "loss went nan"`` compiles a
handful of the several hundred expressions, and a cold start stays cheap.

Every expression must be linear-time safe (issue 14), which ``linear_problem`` checks for
``kb lint``: all quantifiers bounded (``{0,3}``, never ``*`` / ``+`` / ``{2,}``) with at most
MAX_REPEAT repetitions, no quantifier or alternation inside a quantified group, no backreference.
Each attempt then explores a bounded number of paths, so a search is linear in the text.
"""
from __future__ import annotations

import re
from functools import cache
from typing import Any, NamedTuple

from ..knowledge.model import FactSpec, KnowledgeBase

NUM = r"(?P<value>[-+]?(?:\d{1,12}(?:\.\d{0,12})?|\.\d{1,12})(?:[eE][-+]?\d{1,3})?)"
MAX_REPEAT = 100
FLAG = r"(?P<flag>true|false|yes|no|on|off|1|0)(?![\w.])"
_BEFORE = r"(?<![A-Za-z0-9_.\-])"
_AFTER = r"(?![A-Za-z0-9_])"
# The dot leaders of the configuration dumps people paste whole: DeepSpeed's engine print
# ("  gradient_clipping ............ 1.0") and Megatron's argument list ("  bf16 ...... True").
_LEADER = r"\s\.{2,80}\s{1,3}"


class Pattern(NamedTuple):
    """One expression and what a match means."""

    rx: str
    kind: str            # text | key | signature | context
    fact: str = ""       # text, key: the fact it sets
    signature: str = ""  # signature, context: the signature it belongs to
    set: Any = None      # fixed value (None: the captured value)
    negated: Any = None  # value of a negated (text) or false (key) match
    values: tuple = ()   # (spelling, choice) pairs for captured choice values
    trust: float = 1.0
    sets: tuple = ()     # context: (fact, value) pairs
    literals: tuple = ()  # prefilter: one of these (lowercase) must occur in the text
    width: int = 0       # the longest possible match (0: unknown, search everywhere)
    requires: tuple = ()  # groups of literals: any text the expression matches holds one of each group

    @property
    def compiled(self) -> re.Pattern:
        return _compile(self.rx)


@cache
def _compile(rx: str) -> re.Pattern:
    return re.compile(rx, re.IGNORECASE)


def phrase(words: str) -> str:
    """A literal phrase as a regex: any case, 1-3 spaces between words, whole words at ASCII ends."""
    body = r"\s{1,3}".join(re.escape(w) for w in words.split())
    if re.match(r"[A-Za-z0-9_]", words[:1]):
        body = r"(?<![A-Za-z0-9_])" + body
    if re.search(r"[A-Za-z0-9_]$", words):
        body += _AFTER
    return body


def expand(rx: str) -> str:
    """``{NUM}`` in a knowledge regex captures a number as the value."""
    return rx.replace("{NUM}", NUM)


def key_expressions(key: str, spec: FactSpec, switch: bool, mapped: bool, quoted: bool = False) -> list[str]:
    """How a key or flag looks in pasted text: ``lr=3e-4``, ``--lr 1e-4``, ``'learning_rate': 2e-05``,
    ``--fp16``, ``bf16=True``, ``torch_dtype=torch.float16``, ``hidden_size 4096``,
    ``gradient_clipping ...... 1.0`` (a pasted DeepSpeed or Megatron config dump); a ``quoted``
    key only as JSON writes it (``"torch_dtype": "bfloat16"`` of a pasted config.json).

    Dotted keys (nested config paths) and one-letter keys are for structured files only."""
    if "." in key or len(key) < 2:
        return []
    name = re.escape(key).replace("_", "[-_]")
    if quoted:
        return [r"[\"']" + name + r"[\"']\s{0,3}:\s{0,3}[\"']?(?P<value>[A-Za-z0-9_.\-]{1,40})"]
    assign = r"(?:[\"']?\s{0,3}[:=]\s{0,3}[\"'\[]?|" + _LEADER + ")"
    if switch:
        return [_BEFORE + "--" + name + r"(?:[ =]" + FLAG + r")?(?![\w-])",
                _BEFORE + name + _AFTER + assign + FLAG]
    if spec.type == "number":
        return [_BEFORE + "(?:--?)?" + name + _AFTER + r"(?:" + assign + r"|\s{1,3})" + NUM]
    if mapped or spec.type in ("choice", "text"):
        return [_BEFORE + "(?:--?)?" + name + _AFTER + r"(?:" + assign + r"|\s{1,3})"
                + r"(?P<value>[A-Za-z0-9_.\-]{1,40})"]
    return []


def build(kb: KnowledgeBase) -> list[Pattern]:
    """Every expression of the knowledge, with its prefilter."""
    rows: list[Pattern] = []
    for name, spec in kb.facts.items():
        for rule in spec.text:
            for rx in [phrase(w) for w in rule.words] + [expand(r) for r in rule.regex]:
                rows.append(Pattern(rx, "text", fact=name, set=rule.set, negated=rule.negated, trust=rule.trust))
        for rule in spec.keys:
            switch = rule.set is not None or spec.type == "bool"
            values = tuple((s.lower(), choice) for choice, spellings in rule.values.items()
                           for s in [choice, *spellings])
            for key in rule.keys if rule.index is None and not rule.as_text else ():  # text rules read text
                for rx in key_expressions(key, spec, switch, bool(values), rule.quoted):
                    rows.append(Pattern(rx, "key", fact=name, set=_switch_value(rule.set, spec),
                                        negated=_switch_negated(rule.negated, spec), values=values))
    for sig in kb.signatures.values():
        for rx in [re.escape(m) for m in sig.match] + [expand(r) for r in sig.regex]:
            rows.append(Pattern(rx, "signature", signature=sig.id, trust=sig.trust))
        for ctx in sig.context:
            for rx in [phrase(w) for w in ctx.words] + [expand(r) for r in ctx.regex]:
                rows.append(Pattern(rx, "context", signature=sig.id, sets=tuple(sorted(ctx.sets.items()))))
    return [row._replace(literals=tuple(literals(row.rx)), width=max_width(row.rx),
                         requires=tuple(map(tuple, required_groups(row.rx)))) for row in rows]


def _switch_value(value: Any, spec: FactSpec) -> Any:
    return True if value is None and spec.type == "bool" else value


def _switch_negated(value: Any, spec: FactSpec) -> Any:
    return False if value is None and spec.type == "bool" else value


_TABLES: dict[int, tuple[KnowledgeBase, list[Pattern]]] = {}


def table(kb: KnowledgeBase) -> list[Pattern]:
    """The knowledge's patterns, built once per knowledge version (cached on disk, as plain tuples:
    ~3x faster to read back than one dict per row) and per process."""
    held = _TABLES.get(id(kb))
    if held is not None and held[0] is kb:
        return held[1]
    from ..knowledge.cache import memo

    rows = memo(kb, "patterns", lambda: [tuple(p) for p in build(kb)], __file__, valid=_valid_rows)
    out = list(map(Pattern._make, rows))
    _TABLES[id(kb)] = (kb, out)
    return out


def _valid_rows(rows) -> bool:
    """A cached table of the right shape (a damaged or foreign cache file is rebuilt)."""
    size = len(Pattern._fields)
    return isinstance(rows, list) and all(
        type(r) is tuple and len(r) == size and type(r[0]) is str and r[1] in KINDS for r in rows)


KINDS = ("text", "key", "signature", "context")


# --------------------------------------------------------------------------- analysis of an expression
def _parser():
    import re._parser as parser  # Python >= 3.11
    return parser


def literals(rx: str) -> list[str]:
    """Lowercase literals of which at least one occurs in any text the expression matches; [] when
    none can be named (the expression is then always tried)."""
    tree = _tree(rx)
    return _required(tree) if tree is not None else []


def required_groups(rx: str) -> list[list[str]]:
    """Groups of lowercase literals, each of which has a member in any text the expression matches:
    a literal run outside alternatives and optional parts is a group of one, an alternation
    (``(?:is|was|为|是)``) gives one literal per branch. A text missing a whole group cannot match,
    so the expression is not even compiled for it."""
    tree = _tree(rx)
    return _groups(tree) if tree is not None else []


def _tree(rx: str) -> list | None:
    """The parsed expression as sre's item list; None when it cannot be analysed."""
    try:
        return list(_parser().parse(rx, re.IGNORECASE))
    except (re.error, ImportError):
        return None


def _groups(items: list) -> list[list[str]]:
    parser = _parser()
    groups: list[list[str]] = []
    run = ""
    for op, arg in items + [(None, None)]:
        if op is parser.LITERAL:
            run += chr(arg).lower()
            continue
        if run:
            groups.append([run])
        run = ""
        if op is parser.SUBPATTERN:
            groups += _groups(list(arg[-1]))
        elif op in (parser.MAX_REPEAT, parser.MIN_REPEAT) and arg[0] >= 1:  # the body occurs at least once
            groups += _groups(list(arg[2]))
        elif op is parser.BRANCH:
            picks = [_groups(list(branch)) for branch in arg[1]]
            if all(picks):  # the most telling group of each branch: the one whose shortest literal is longest
                groups.append(sorted({lit for pick in picks for lit in max(pick, key=lambda g: min(map(len, g)))}))
    return groups


def max_width(rx: str) -> int:
    """The longest text the expression can match (bounded quantifiers make it finite), 0 if unknown."""
    try:
        high = _parser().parse(rx, re.IGNORECASE).getwidth()[1]
    except (re.error, ImportError, OverflowError):
        return 0
    return high if high < 100_000 else 0


def _required(items: list) -> list[str]:
    """The longest literal run of a sequence, or one literal per branch of an alternation."""
    parser = _parser()
    best: list[str] = []
    run = ""
    for op, arg in items + [(None, None)]:
        if op is parser.LITERAL:
            run += chr(arg).lower()
            continue
        if len(run) >= 2 and (not best or len(run) > max(map(len, best))):
            best = [run]
        run = ""
        if op is parser.SUBPATTERN:
            inner = _required(list(arg[-1]))
        elif op is parser.BRANCH:
            branches = [_required(list(b)) for b in arg[1]]
            inner = [] if any(not b for b in branches) else sorted({x for b in branches for x in b})
        else:
            continue
        if inner and (not best or min(map(len, inner)) > max(map(len, best))):
            best = inner
    return best


def linear_problem(rx: str) -> str | None:
    """Why the expression could backtrack super-linearly (or does not compile), else None."""
    try:
        re.compile(rx)
        tree = _parser().parse(rx)
    except re.error as err:
        return f"does not compile: {err}"
    return _walk(list(tree), inside_repeat=False)


def _walk(items: list, inside_repeat: bool) -> str | None:
    parser = _parser()
    for op, arg in items:
        if op in (parser.MAX_REPEAT, parser.MIN_REPEAT, getattr(parser, "POSSESSIVE_REPEAT", None)):
            low, high, body = arg
            if high == parser.MAXREPEAT or high > MAX_REPEAT:
                return f"unbounded quantifier (write {{{low},N}} with N <= {MAX_REPEAT} instead of *, + or {{{low},}})"
            if high <= 1:  # an optional part: nothing to repeat
                problem = _walk(list(body), inside_repeat)
            elif inside_repeat:
                return "nested quantifier (a quantifier inside a quantified group)"
            elif any(o is parser.BRANCH for o, _ in body):
                return "alternation inside a quantified group"
            else:
                problem = _walk(list(body), inside_repeat=True)
        elif op is parser.SUBPATTERN:
            problem = _walk(list(arg[-1]), inside_repeat)
        elif op is parser.BRANCH:
            if inside_repeat:
                return "alternation inside a quantified group"
            problem = next(filter(None, (_walk(list(b), inside_repeat) for b in arg[1])), None)
        elif op in (parser.ASSERT, parser.ASSERT_NOT):
            problem = _walk(list(arg[1]), inside_repeat)
        elif op in (parser.GROUPREF, parser.GROUPREF_EXISTS):
            return "backreference"
        else:
            continue
        if problem:
            return problem
    return None
