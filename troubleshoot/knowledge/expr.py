"""Small, safe expressions over facts: rule conditions and computed numbers in fix steps.

``Expr("sqrt(2/(5*model.hidden_size))")`` is parsed with ``ast`` and checked against a whitelist
when the rule file is loaded; evaluation walks the tree itself (never ``eval``), so a rule file can
compute BLOOM's init std but cannot call anything else.

>>> Expr("sqrt(2/(5*model.hidden_size))").evaluate({"model.hidden_size": 11600})
0.005872202195147035
"""
from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt, "log": math.log, "log2": math.log2, "exp": math.exp,
    "abs": abs, "min": min, "max": max, "round": round,
}
CONSTANTS = {"true": True, "false": False, "none": None, "True": True, "False": False, "None": None}

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: operator.pow, ast.Mod: operator.mod}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}


class ExprError(ValueError):
    """The expression uses something outside the whitelist, or could not be computed."""


class Unknown(Exception):
    """A fact the expression needs is not known yet."""


def dotted_name(node: ast.AST) -> str | None:
    """'model.hidden_size' for Attribute(Name('model'), 'hidden_size'); None otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class Expr:
    """A parsed, whitelisted expression. ``facts`` is the set of fact names it reads."""

    stops_at: str | None = None  # see compiled()

    def __init__(self, source: str, check: bool = True) -> None:
        """``check=False`` defers parsing to first use: for knowledge already validated unchanged."""
        self.source = str(source).strip()
        if check:
            self._tree  # noqa: B018 - parse and validate now, so errors name the rule file

    def compiled(self) -> list:
        """``[source, facts, stops_at]``: what ``from_compiled`` needs to answer without parsing
        while none of the facts is known. ``stops_at`` is the fact at which evaluation then stops
        (raises Unknown), or None when it then gives a value or an error."""
        try:
            self.evaluate({})
        except Unknown as err:
            return [self.source, sorted(self.facts), str(err.args[0])]
        except Exception:  # noqa: BLE001 - whatever it was, no shortcut is always right
            pass
        return [self.source, sorted(self.facts), None]

    @classmethod
    def from_compiled(cls, source: str, facts: list[str], stops_at: str | None) -> Expr:
        """The expression of ``compiled()`` (knowledge/snapshot.py), parsed only once one of its
        facts has a value: most conditions in a run are about facts nobody gave."""
        expr = cls(source, check=False)
        expr.__dict__["facts"] = set(facts)
        expr.stops_at = stops_at
        return expr

    @cached_property
    def _tree(self) -> ast.AST:
        if len(self.source) > MAX_SOURCE:  # checking and evaluating recurse once per nesting level
            raise ExprError(f"expression longer than {MAX_SOURCE} characters: {self.source[:40]!r}...")
        try:
            tree = ast.parse(self.source, mode="eval").body
        except SyntaxError as err:
            raise ExprError(f"not a valid expression: {self.source!r} ({err.msg})") from None
        # The parser's own stack; a NUL byte; CPython's "AST constructor recursion depth mismatch"
        # (a SystemError it raises instead of a RecursionError for some deep nestings, seen under load).
        except (MemoryError, RecursionError, ValueError, SystemError):
            raise ExprError(f"not a valid expression: {self.source[:40]!r} (nested too deeply)") from None
        self.__dict__["facts"] = set()
        self._check(tree)
        return tree

    @cached_property
    def facts(self) -> set[str]:
        """The fact names the expression reads."""
        self._tree  # noqa: B018 - fills facts
        return self.__dict__["facts"]

    def __repr__(self) -> str:
        return f"Expr({self.source!r})"

    def _check(self, node: ast.AST) -> None:
        name = dotted_name(node)
        if name is not None:
            if name not in CONSTANTS:
                self.facts.add(name)
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
            return
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            children = [node.left, node.right]
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            children = [node.operand]
        elif isinstance(node, ast.BoolOp):
            children = node.values
        elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            children = [node.left, *node.comparators]
        elif isinstance(node, (ast.List, ast.Tuple)):
            children = node.elts
        elif is_unknown_call(node):
            children = node.args  # the one fact it asks about: read, so questions and lint see it
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in FUNCTIONS and not node.keywords):
            children = node.args
        else:
            what = type(node).__name__
            if isinstance(node, ast.Call):
                what = f"call of {ast.unparse(node.func)}()"
            raise ExprError(f"{self.source!r}: {what} is not allowed "
                            f"(use facts, numbers, + - * / **, comparisons, and/or/not, {', '.join(FUNCTIONS)}, "
                            f"{UNKNOWN}(fact))")
        for child in children:
            self._check(child)

    def evaluate(self, facts: Mapping[str, Any]) -> Any:
        """Compute the value; raises Unknown if a needed fact is missing (or None)."""
        if self.stops_at is not None and all(facts.get(name) is None for name in self.facts):
            raise Unknown(self.stops_at)  # what walking the tree would raise: it reads facts only by name
        try:
            return self._eval(self._tree, facts)
        except (Unknown, ExprError):
            raise
        except (ArithmeticError, TypeError, ValueError) as err:
            raise ExprError(f"{self.source!r}: {err}") from None

    def holds(self, facts: Mapping[str, Any]) -> bool | None:
        """True / False, or None while a fact it needs is unknown (or it cannot be computed)."""
        try:
            return bool(self.evaluate(facts))
        except (Unknown, ExprError):
            return None

    def _eval(self, node: ast.AST, facts: Mapping[str, Any]) -> Any:
        name = dotted_name(node)
        if name is not None:
            if name in CONSTANTS:
                return CONSTANTS[name]
            value = facts.get(name)
            if value is None:
                raise Unknown(name)
            return value
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            return _bounded(type(node.op), self._eval(node.left, facts), self._eval(node.right, facts))
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](self._eval(node.operand, facts))
        if isinstance(node, ast.BoolOp):
            return self._three_valued(node, facts)
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, facts)
            for op, right_node in zip(node.ops, node.comparators):
                right = self._eval(right_node, facts)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self._eval(e, facts) for e in node.elts]
        if is_unknown_call(node):
            return facts.get(dotted_name(node.args[0])) is None
        if isinstance(node, ast.Call):
            return FUNCTIONS[node.func.id](*(self._eval(a, facts) for a in node.args))
        raise ExprError(f"{self.source!r}: cannot evaluate {type(node).__name__}")

    def _three_valued(self, node: ast.BoolOp, facts: Mapping[str, Any]) -> bool:
        """``and`` / ``or`` in Kleene's three-valued logic: one operand that decides is enough,
        whichever its place and whatever the others are. "version changed or the old release
        works" holds once the old release is known to work, even while nobody said whether the
        version changed; read left to right, the unknown first operand hid it. Unknown only when
        no known operand decides and one is unknown (the first such fact is the one named)."""
        deciding = isinstance(node.op, ast.Or)  # an or is decided by a true operand, an and by a false one
        missing = None
        for value in node.values:
            try:
                if bool(self._eval(value, facts)) == deciding:
                    return deciding
            except Unknown as err:
                missing = missing or err
        if missing is not None:
            raise missing
        return not deciding


UNKNOWN = "unknown"  # unknown(fact): true while the fact has no value. An item that stands in for a
# more direct fact ("AMP computes in fp16") reads it only while that fact is missing, so a report
# that gives both counts the observation once (docs/calibration.md, "No double counting").


def is_unknown_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == UNKNOWN
            and not node.keywords and len(node.args) == 1 and dotted_name(node.args[0]) is not None
            and dotted_name(node.args[0]) not in CONSTANTS)


def _bounded(op: type, left: Any, right: Any) -> Any:
    """``left op right`` within the resource policy: no number past 1e300, no text or list past
    MAX_SEQUENCE items, no %-formatting of text (``9 ** 9 ** 9`` or ``'a' * 10**10`` in a rule
    file must fail fast, not exhaust the machine)."""
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right))
    if op is ast.Pow and numbers and (abs(right) > 64 or abs(left) > 1e300):
        left = float(left)  # float ** raises OverflowError instead of building a huge int
    if op is ast.Mult and not numbers:
        count = right if isinstance(left, (str, list)) else left
        seq = left if isinstance(left, (str, list)) else right
        if isinstance(count, int) and isinstance(seq, (str, list)) and len(seq) * max(count, 0) > MAX_SEQUENCE:
            raise ExprError(f"a repeated text or list longer than {MAX_SEQUENCE:,} items")
    if op is ast.Mod and isinstance(left, str):
        raise ExprError("%-formatting of text is not allowed")
    value = _BINARY[op](left, right)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > 1e300:
        raise ExprError("a number beyond 1e300")
    return value


MAX_SEQUENCE = 10_000
MAX_SOURCE = 500           # characters of one expression (the longest in rules/ is under 200)
FORMAT_SPEC = re.compile(r"^(.?[<>=^])?[+\- ]?#?0?(\d{1,3})?[,_]?(\.\d{1,2})?[bcdeEfFgGnosxX%]?$")


def split_template(text: str) -> list[tuple[str, str, str]]:
    """Split 'Set {{ expr :fmt }} now' into [(literal, expr, fmt), ...]; the last expr may be ''."""
    out, rest = [], text
    while "{{" in rest:
        before, _, after = rest.partition("{{")
        inner, sep, rest = after.partition("}}")
        if not sep:
            raise ExprError(f"unclosed '{{{{' in {text!r}")
        expr, fmt = inner, ""
        if ":" in inner:
            expr, _, fmt = inner.rpartition(":")
        if not FORMAT_SPEC.match(fmt.strip()):
            raise ExprError(f"format ':{fmt.strip()[:20]}' is not a number format of at most 3 digits width "
                            f"(e.g. :.5f, :.1e, :,)")
        out.append((before, expr.strip(), fmt.strip()))
    out.append((rest, "", ""))
    return out


def render_template(text: str, facts: Mapping[str, Any]) -> tuple[str, set[str]]:
    """Fill {{ expr :fmt }} slots; returns the text and the facts still needed to compute it.

    A slot that needs an unknown fact shows it as a placeholder a user can see is not a value
    (``checkpoint-<ROLLBACK_ITERATION>``), never as the fact's dotted name.

    >>> render_template("use {{ sqrt(2/(5*h.size)) :.5f }}", {"h.size": 11600})[0]
    'use 0.00587'
    >>> render_template("divide {{ train.lr/5 :.1e }}", {})
    ('divide <LR>/5', {'train.lr'})
    """
    pieces, missing = [], set()
    for literal, source, fmt in split_template(text):
        pieces.append(literal)
        if not source:
            continue
        expr = Expr(source)
        try:
            value = expr.evaluate(facts)
            pieces.append(format(value, fmt) if fmt else _plain(value))
        except Unknown:
            missing.update(f for f in expr.facts if facts.get(f) is None)
            pieces.append(with_placeholders(source, expr.facts, facts))
        except (ExprError, ValueError) as err:
            pieces.append(f"{source} (cannot compute: {err})")
    return "".join(pieces), missing


def placeholder(fact: str) -> str:
    """``logs.rollback_iteration`` -> ``<ROLLBACK_ITERATION>``: what a user replaces in a command."""
    return f"<{fact.rpartition('.')[2].upper()}>"


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def with_placeholders(source: str, names: set[str], facts: Mapping[str, Any]) -> str:
    """The expression with each fact name replaced: known ones by their value, unknown ones by a
    placeholder (the whole name, ``<TRAIN_LR>``, only where two facts would share one)."""
    unknown = sorted(n for n in names if facts.get(n) is None)
    shared = {placeholder(n) for n in unknown if sum(placeholder(m) == placeholder(n) for m in unknown) > 1}

    def swap(match: re.Match) -> str:
        name = match.group(0)
        if name not in names:
            return name
        if facts.get(name) is not None:
            return _plain(facts[name])
        mark = placeholder(name)
        return f"<{name.replace('.', '_').upper()}>" if mark in shared else mark
    return _NAME.sub(swap, source).strip()


def _plain(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
