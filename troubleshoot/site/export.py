"""The knowledge as data for the browser: the search index, each symptom's tree, parsed expressions.

Nothing here re-derives a rule by hand. The search index is read off a live
:class:`~troubleshoot.matcher.SymptomMatcher` (its entries, vocabulary and idf weights, plus the
matcher's constants and stop words); the scoring data is read off the loaded causes and evidence
(priors, ratios, and ``|ln lr - ln else_lr|`` computed here so the browser orders questions with
the very same numbers); ``when`` conditions and ``{{ ... }}`` slots travel as the tree Python's
``ast`` parsed, restricted to the whitelist of ``knowledge/expr.py``, for ``static/llmfix.js`` to
evaluate. A sample node::

    data.mask.binary == false
    -> {"k": "cmp", "l": {"k": "fact", "n": "data.mask.binary"}, "ops": ["=="],
        "rs": [{"k": "const", "t": "bool", "v": false}]}
"""
from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

from .. import engine, matcher, prose
from ..engine import State, open_questions
from ..knowledge.expr import (
    CONSTANTS,
    FUNCTIONS,
    UNKNOWN,
    Expr,
    ExprError,
    dotted_name,
    is_unknown_call,
    split_template,
)
from ..knowledge.model import KnowledgeBase, Symptom

_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.Mod: "%"}
_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
        ast.In: "in", ast.NotIn: "not in"}
_UN = {ast.USub: "-", ast.UAdd: "+", ast.Not: "not"}


def _const(value: Any) -> dict:
    if isinstance(value, bool):
        return {"k": "const", "t": "bool", "v": value}
    if value is None:
        return {"k": "const", "t": "none", "v": None}
    if isinstance(value, int):
        return {"k": "const", "t": "int", "v": value}
    if isinstance(value, float):
        # JSON has no inf/nan: those travel as strings the interpreter turns back into numbers
        return {"k": "const", "t": "float", "v": value if math.isfinite(value) else repr(value)}
    if isinstance(value, str):
        return {"k": "const", "t": "str", "v": value}
    raise ExprError(f"constant {value!r} is not allowed")


def _node(node: ast.AST) -> dict:
    name = dotted_name(node)
    if name is not None:
        return _const(CONSTANTS[name]) if name in CONSTANTS else {"k": "fact", "n": name}
    if isinstance(node, ast.Constant):
        return _const(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        return {"k": "bin", "op": _BIN[type(node.op)], "l": _node(node.left), "r": _node(node.right)}
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UN:
        return {"k": "un", "op": _UN[type(node.op)], "e": _node(node.operand)}
    if isinstance(node, ast.BoolOp):
        return {"k": "bool", "op": "and" if isinstance(node.op, ast.And) else "or",
                "vs": [_node(v) for v in node.values]}
    if isinstance(node, ast.Compare) and all(type(op) in _CMP for op in node.ops):
        return {"k": "cmp", "l": _node(node.left), "ops": [_CMP[type(op)] for op in node.ops],
                "rs": [_node(r) for r in node.comparators]}
    if isinstance(node, (ast.List, ast.Tuple)):
        return {"k": "list", "es": [_node(e) for e in node.elts]}
    if is_unknown_call(node):  # unknown(fact): true while the fact has no value
        return {"k": UNKNOWN, "n": dotted_name(node.args[0])}
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
            and not node.keywords):
        return {"k": "call", "f": node.func.id, "args": [_node(a) for a in node.args]}
    raise ExprError(f"{type(node).__name__} is not allowed in an expression")


def expr_tree(source: str) -> dict:
    """The whitelisted ast of one expression as JSON-able nodes (see the module docstring)."""
    try:
        return _node(ast.parse(str(source).strip(), mode="eval").body)
    except SyntaxError as err:
        raise ExprError(f"not a valid expression: {source!r} ({err.msg})") from None


def template_slots(text: str) -> list[dict]:
    """A fix step split into literal text and computable ``{{ expr :fmt }}`` slots."""
    out = []
    for literal, source, fmt in split_template(text):
        out.append({"text": literal})
        if source:
            try:
                out.append({"expr": expr_tree(source), "src": source, "fmt": fmt,
                            "facts": sorted(_facts_of(source))})
            except ExprError:
                out.append({"text": "{{ " + source + " }}"})
    return out


def _facts_of(source: str) -> set[str]:
    return set(Expr(source).facts)


# --------------------------------------------------------------------------- search
def search_index(kb: KnowledgeBase, urls: dict[str, str]) -> dict:
    """The matcher's own index, so the browser scores a query exactly like `llmfix ask`.

    ``urls`` maps symptom/cause/fix ids to site paths relative to the site root.
    """
    m = matcher.SymptomMatcher(kb)
    consts = ("WORD_WEIGHT", "PHRASE_WEIGHT", "MIN_SCORE", "AMBIGUOUS_MARGIN", "TYPO_CUTOFF", "PASTED_DISCOUNT",
              "MAX_MATCH_CHARS", "HEADLINE_WEIGHT", "HEADLINE_CHARS", "HEADLINE_MIN")
    return {
        "consts": {**{name: getattr(matcher, name) for name in consts if hasattr(matcher, name)},
                   "word_mass_cap": m.word_mass_cap},
        "stopwords": sorted(matcher.STOPWORDS),
        "cjk_stopwords": sorted(set(matcher.CJK_STOP) | set(matcher.CJK_STOP_CHARS)),
        "cjk_glue": matcher.CJK_GLUE,
        "vocab": m.vocab,
        "idf": [m.idf[t] for t in m.vocab],
        "prose": prose_rules(),
        "entries": [{"id": e.id, "title": e.title, "url": urls.get(e.id, ""), "phrases": e.phrases,
                     "words": [[t, w] for t, w in e.words.items()]} for e in m.entries],
        # a second, looser list under the symptoms: causes and fixes by title words
        "items": ([{"id": c.id, "kind": "cause", "title": c.title, "url": urls.get(c.id, "")}
                   for c in kb.causes.values()]
                  + [{"id": f.id, "kind": "fix", "title": f.title, "url": urls.get(f.id, "")}
                     for f in kb.fixes.values()]),
    }


def prose_rules() -> dict:
    """``prose.rules()`` for the browser: a pasted report is cleaned exactly as `llmfix ask` cleans it."""
    rules = prose.rules()
    return {"headings": rules["headings"], "space": _spaces(0),
            **{role: {name: js_regex(p) for name, p in rules[role].items()} for role in ("match", "search", "sub")}}


_JS_FLAGS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"))


def _spaces(flags: int) -> str:
    """Python's own ``\\s`` (str.isspace, or ASCII whitespace under re.ASCII) as the inside of a
    JavaScript character class: a browser's ``\\s`` is another set (no U+001C-U+001F, U+0085)."""
    space = re.compile(r"\s", flags & re.ASCII)
    return "".join(f"\\u{c:04x}" for c in range(0x3001) if space.match(chr(c)))


def js_regex(pattern: re.Pattern) -> list[str]:
    """[source, flags] of a JavaScript RegExp matching what ``pattern`` matches: named groups as
    ``(?<name>``, ``\\s`` / ``\\S`` spelled out as Python's set. ``\\w \\d \\b`` mean ASCII in
    JavaScript, so a pattern using them must be re.ASCII (ExprError otherwise)."""
    src, ascii_only = pattern.pattern, bool(pattern.flags & re.ASCII)
    space, out, class_at, i = _spaces(pattern.flags), [], -1, 0
    while i < len(src):
        ch, esc = src[i], src[i:i + 2]
        if ch == "\\" and esc in ("\\s", "\\S"):
            if class_at >= 0 and esc == "\\S":
                raise ExprError(f"{src!r}: \\S inside a character class")
            out.append(space if class_at >= 0 else "[" + "^" * (esc == "\\S") + space + "]")
        elif ch == "\\":
            if esc[1:] and esc[1] in "wdbWDB" and not ascii_only:
                raise ExprError(f"{src!r}: {esc} needs re.ASCII to mean the same in a browser")
            out.append(esc)
        else:
            if ch == "[" and class_at < 0:
                class_at = i
            elif ch == "]" and class_at >= 0 and i > class_at + 1 + (src[class_at + 1] == "^"):
                class_at = -1  # a ']' first in a class is a literal
            out.append(ch)
            i += 1
            continue
        i += 2
    flags = "".join(js for flag, js in _JS_FLAGS if pattern.flags & flag)
    return ["".join(out).replace("(?P<", "(?<"), flags]


# --------------------------------------------------------------------------- symptoms
def question_order(kb: KnowledgeBase, sid: str) -> list[str]:
    """The facts of a symptom's checks in the order the engine asks them with nothing known."""
    asked = [q.fact for q in open_questions(State(kb, {sid: 1.0}))]
    rest = [c.fact for c in kb.symptoms[sid].checks if c.fact not in asked]
    return asked + list(dict.fromkeys(rest))


def fact_spec(kb: KnowledgeBase, name: str) -> dict:
    spec = kb.facts.get(name)
    if spec is None:
        return {"type": "text", "description": "", "choices": [], "unit": ""}
    defined = expr_tree(spec.defined_when.source) if spec.defined_when else None
    return {"type": spec.type, "description": spec.description, "choices": spec.choices, "unit": spec.unit,
            "defined_when": defined}


def symptom_data(kb: KnowledgeBase, symptom: Symptom, urls: dict[str, str]) -> dict:
    """Everything the interactive troubleshooter of one symptom page needs, and nothing re-typed."""
    facts: set[str] = set()
    causes = []
    for cause in symptom.causes:
        evidence = []
        for ev in cause.evidence:
            facts |= ev.when.facts
            evidence.append({"when": expr_tree(ev.when.source), "src": ev.when.source,
                             "facts": sorted(ev.when.facts), "lr": ev.lr, "else_lr": ev.else_lr,
                             "span": abs(math.log(ev.lr) - math.log(ev.else_lr)),
                             "confirms": ev.confirms, "says": ev.says})
        causes.append({"id": cause.id, "title": cause.title, "prior": cause.prior,
                       "url": urls.get(cause.id, ""), "evidence": evidence,
                       "fixes": [f for f in cause.fixes if f in kb.fixes]})
    checks = []
    for check in symptom.checks:
        facts.add(check.fact)
        checks.append({"fact": check.fact, "ask": check.ask, "how": check.how, "probe": check.probe,
                       "cost": check.cost, "after": check.after})
    fixes = {}
    for cause in symptom.causes:
        for fid in cause.fixes:
            fix = kb.fixes.get(fid)
            if fix is None or fid in fixes:
                continue
            steps = [template_slots(step) for step in fix.steps]
            for step in steps:
                for slot in step:
                    facts.update(slot.get("facts", ()))
            fixes[fid] = {"title": fix.title, "url": urls.get(fid, ""), "steps": steps}
    return {
        "id": symptom.id, "title": symptom.title,
        "consts": {"RULED_OUT": engine.RULED_OUT, "LIKELY": engine.LIKELY, "LIKELY_LEAD": engine.LIKELY_LEAD,
                   "LIKELY_LEAD_PRIOR": engine.LIKELY_LEAD_PRIOR,
                   "COUNTERS": engine.COUNTERS, "MIN_QUESTION_VALUE": engine.MIN_QUESTION_VALUE},
        "checks": checks, "causes": causes, "fixes": fixes,
        "facts": {name: fact_spec(kb, name) for name in sorted(facts)},
        # the engine breaks ties on the cheapest check of a fact across *all* symptoms
        "cost": {c["fact"]: min(x.cost for x in kb.checks_for(c["fact"])) for c in checks},
    }


# --------------------------------------------------------------------------- embedding
_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def safe_json(data: Any) -> str:
    """JSON that is inert inside <script> and in an HTML attribute-free JS file ('</script>' too)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for raw, escaped in _UNSAFE.items():
        text = text.replace(raw, escaped)
    return text


def js_assign(name: str, data: Any) -> str:
    """``window.NAME = {...};`` for a data file loaded with <script src> (no fetch over file://)."""
    return f"window.{name} = {safe_json(data)};\n"


def js_assign_item(name: str, key: str, data: Any) -> str:
    """``window.NAME[key] = {...};`` so several data files can fill one table."""
    return (f"window.{name} = window.{name} || {{}};\n"
            f"window.{name}[{safe_json(key)}] = {safe_json(data)};\n")
