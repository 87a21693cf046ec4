"""`kb lint` for the rules that read facts from text: every expression compiles and is linear-time
(troubleshoot/evidence/patterns.py), every value a rule sets is a value of its fact, and every
fact a signature sets is registered."""
from __future__ import annotations

from typing import Any

from .model import FactSpec, KnowledgeBase
from .schema import Problem


def text_rules(kb: KnowledgeBase) -> list[Problem]:
    from ..evidence.patterns import expand, linear_problem, phrase

    out: list[Problem] = []
    for spec in kb.facts.values():
        for rule in spec.text:
            where = (spec.file, rule.line, f"{spec.name}.text")
            patterns = [phrase(w) for w in rule.words] + [expand(r) for r in rule.regex]
            out += _expressions(where, patterns, linear_problem)
            out += _values(where, spec, {"set": rule.set, "negated": rule.negated})
            if rule.set is None and not any("(?P<value>" in expand(r) for r in rule.regex) and rule.negated is None:
                out.append(Problem(*where, "a text rule needs 'set', 'negated' or a regex capturing "
                                           "{NUM} / (?P<value>...)"))
        for rule in spec.keys:
            where = (spec.file, rule.line, f"{spec.name}.keys")
            out += _values(where, spec, {"set": rule.set, "negated": rule.negated})
            for choice in rule.values:
                out += _values(where, spec, {f"values.{choice}": choice})
            if rule.as_text and (not spec.text or rule.set is not None or rule.values or rule.quoted):
                out.append(Problem(*where, "an as_text rule reads values with the fact's own text rules: the fact "
                                           "needs text rules, and the rule no set, values or quoted"))
    for sig in kb.signatures.values():
        where = (sig.file, sig.line, sig.id)
        out += _expressions(where, [expand(r) for r in sig.regex], linear_problem)
        for ctx in sig.context:
            out += _expressions(where, [phrase(w) for w in ctx.words] + [expand(r) for r in ctx.regex], linear_problem)
        for sets in [sig.sets] + [c.sets for c in sig.context]:
            for name, value in sets.items():
                spec = kb.facts.get(name)
                if spec is None:
                    out.append(Problem(*where, f"sets unknown fact '{name}' (register it in rules/_facts/)"))
                else:
                    out += _values(where, spec, {f"sets.{name}": value})
    return out


def _expressions(where: tuple, expressions: list[str], check) -> list[Problem]:
    return [Problem(*where, f"expression {rx!r}: {problem}") for rx in expressions if (problem := check(rx))]


def _values(where: tuple, spec: FactSpec, values: dict[str, Any]) -> list[Problem]:
    out = []
    for field, value in values.items():
        if value is None:
            continue
        try:
            spec.parse(value)
        except ValueError as err:
            out.append(Problem(*where, f"{field}: {err}"))
    return out
