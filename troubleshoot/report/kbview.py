"""`llmfix kb list` and `llmfix kb show ID`: the knowledge base read in the terminal.

Fix steps are templates: ``show`` fills them from the user's ``--answer`` values (``{{ sqrt(2/(5*
model.hidden_size)) :.5f }}`` becomes 0.00587 at hidden size 11600) and otherwise shows a
placeholder and the answer that would fill it. Prose is Markdown, rendered for the terminal.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from ..knowledge.expr import placeholder, render_template
from ..knowledge.model import Article, Cause, FactSpec, FindingSpec, Fix, KnowledgeBase, Symptom
from .markdown import to_terminal
from .terminal import hang


def listing(kb: KnowledgeBase) -> str:
    lines = []
    for s in kb.symptoms.values():
        lines.append(click.style(f"{s.id}", bold=True) + f"  {s.title}")
        for c in s.causes:
            lines.append(f"  {c.id}  {c.title}")
            lines += [f"      {fid}" for fid in c.fixes]
    lines.append(f"\n{len(kb.symptoms)} symptoms, {len(kb.causes)} causes, {len(kb.fixes)} fixes, "
                 f"{len(kb.facts)} facts (llmfix kb list --facts), {len(kb.findings)} probe findings. "
                 "Show one: llmfix kb show ID")
    return "\n".join(lines) + "\n"


def fact_listing(kb: KnowledgeBase, width: int) -> str:
    """Every fact a user can give with --answer FACT=VALUE: its name, the values it takes, what it is."""
    lines = []
    for spec in sorted(kb.facts.values(), key=lambda f: f.name):
        lines += hang(click.style(spec.name, bold=True) + f"  ({value_hint(spec)})  ", spec.description, width, 4)
    lines.append(f"\n{len(kb.facts)} facts. Give one: --answer FACT=VALUE; more: llmfix kb show FACT")
    return "\n".join(lines) + "\n"


def value_hint(spec: FactSpec) -> str:
    hint = {"bool": "yes|no", "number": "number", "text": "text"}.get(spec.type, "|".join(spec.choices))
    return f"{hint}, {spec.unit}" if spec.unit else hint


def show(kb: KnowledgeBase, item: object, values: Mapping[str, Any] | None = None, width: int = 100) -> str:
    """One item; fix templates computed from ``values`` (the --answer facts)."""
    values = values or {}
    if isinstance(item, Symptom):
        return _symptom(kb, item, width)
    if isinstance(item, Cause):
        return _cause(kb, item, values, width)
    if isinstance(item, Fix):
        return "\n".join(_fix(item, values, width)) + "\n"
    if isinstance(item, FactSpec):
        return _fact(kb, item, width)
    if isinstance(item, FindingSpec):
        return _finding(item, width)
    if isinstance(item, Article):
        return to_terminal(item.body, width)
    raise TypeError(item)


def _finding(f: FindingSpec, width: int) -> str:
    head = click.style(f"{f.id}: {f.title}", bold=True) + "  (a probe finding)"
    return "\n".join([head, *hang("  ", " ".join(f.explanation.split()), width)]) + "\n"


def _symptom(kb: KnowledgeBase, s: Symptom, width: int) -> str:
    head = [click.style(f"{s.id}: {s.title}", bold=True), *hang("", s.summary, width), "",
            *hang("Causes: ", ", ".join(c.id for c in s.causes), width), ""]
    article = kb.articles.get(s.id)
    return "\n".join(head) + "\n" + (to_terminal(article.body, width) if article else "")


def _cause(kb: KnowledgeBase, c: Cause, values: Mapping[str, Any], width: int) -> str:
    lines = [click.style(f"{c.id}: {c.title}", bold=True), f"symptom: {c.symptom}   prior: {c.prior}", ""]
    if c.summary:
        lines += [to_terminal(c.summary, width).rstrip("\n"), ""]
    lines.append("Evidence (likelihood ratio if it holds / if not):")
    lines += [f"  {e.when.source}   ×{e.lr:g} / ×{e.else_lr:g}" + ("  (confirms)" if e.confirms else "")
              for e in c.evidence]
    if c.risk:
        lines += ["", *hang("Risky settings: ", f"{c.risk.when.source}: {' '.join(c.risk.says.split())}", width, 2)]
    if c.not_this_when:
        lines += ["", *hang("Not this when: ", " ".join(c.not_this_when.split()), width, 2)]
    if c.reported_as:
        lines += ["", "Reported as:"]
        lines += [line for r in c.reported_as for line in hang("  - ", f"{r.text} ({'; '.join(r.sources)})", width, 4)]
    lines += ["", "Fixes:"]
    for fid in c.fixes:
        if fid in kb.fixes:
            lines += _fix(kb.fixes[fid], values, width, indent="  ") + [""]
    lines += hang("Sources: ", "; ".join(c.sources), width, 2)
    return "\n".join(lines) + "\n"


def _fix(f: Fix, values: Mapping[str, Any], width: int, indent: str = "") -> list[str]:
    lines = [click.style(f"{indent}{f.id}: {f.title}", bold=True)]
    needs: set[str] = set()
    for step in f.steps:
        text, missing = render_template(step, values)
        needs |= missing
        lines += hang(f"{indent}  - ", text, width)
    if needs:
        fill = ", ".join(f"{placeholder(n)}: --answer {n}=VALUE" for n in sorted(needs))
        lines += hang(f"{indent}  ", f"(to compute {fill})", width)
    for attempt in f.did_not_work:
        lines += hang(f"{indent}  did not work: ", f"{attempt.text} ({'; '.join(attempt.sources)})", width)
    lines += hang(f"{indent}  sources: ", "; ".join(f.sources), width)
    return lines


def _fact(kb: KnowledgeBase, spec: FactSpec, width: int) -> str:
    lines = [click.style(spec.name, bold=True) + f"  ({value_hint(spec)})", *hang("  ", spec.description, width)]
    for check in kb.checks_for(spec.name):
        lines += hang(f"  asked by {check.symptom}: ", check.ask, width)
    lines.append(f"  give it: --answer {spec.name}=VALUE")
    also = "\n" + _finding(kb.findings[spec.name], width) if spec.name in kb.findings else ""
    return "\n".join(lines) + "\n" + also
