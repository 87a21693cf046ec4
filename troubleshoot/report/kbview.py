"""`llmfix kb list` and `llmfix kb show ID`: the knowledge base read in the terminal."""
from __future__ import annotations

import click

from ..knowledge.model import Article, Cause, FactSpec, FindingSpec, Fix, KnowledgeBase, Symptom


def listing(kb: KnowledgeBase) -> str:
    lines = []
    for s in kb.symptoms.values():
        lines.append(click.style(f"{s.id}", bold=True) + f"  {s.title}")
        for c in s.causes:
            lines.append(f"  {c.id}  {c.title}")
            lines += [f"      {fid}" for fid in c.fixes]
    lines.append(f"\n{len(kb.symptoms)} symptoms, {len(kb.causes)} causes, {len(kb.fixes)} fixes, "
                 f"{len(kb.facts)} facts, {len(kb.findings)} probe findings. Show one: llmfix kb show ID")
    return "\n".join(lines) + "\n"


def show(kb: KnowledgeBase, item: object) -> str:
    if isinstance(item, Symptom):
        return _symptom(kb, item)
    if isinstance(item, Cause):
        return _cause(kb, item)
    if isinstance(item, Fix):
        return _fix(item)
    if isinstance(item, FactSpec):
        checks = kb.checks_for(item.name)
        asked = "".join(f"\n  asked by {c.symptom}: {c.ask}" for c in checks)
        also = "\n" + _finding(kb.findings[item.name]) if item.name in kb.findings else ""
        kind = f"{item.type}{': ' + ', '.join(item.choices) if item.choices else ''}"
        return f"{item.name}  ({kind})\n  {item.description}{asked}\n{also}"
    if isinstance(item, FindingSpec):
        return _finding(item)
    if isinstance(item, Article):
        return _markdown(item.body)
    raise TypeError(item)


def _finding(f: FindingSpec) -> str:
    return f"{click.style(f'{f.id}: {f.title}', bold=True)}  (a probe finding)\n  {f.explanation}\n"


def _symptom(kb: KnowledgeBase, s: Symptom) -> str:
    head = [click.style(f"{s.id}: {s.title}", bold=True), s.summary, "",
            "Causes: " + ", ".join(c.id for c in s.causes), ""]
    article = kb.articles.get(s.id)
    return "\n".join(head) + (_markdown(article.body) if article else "")


def _cause(kb: KnowledgeBase, c: Cause) -> str:
    lines = [click.style(f"{c.id}: {c.title}", bold=True), f"symptom: {c.symptom}   prior: {c.prior}", ""]
    if c.summary:
        lines += [c.summary.strip(), ""]
    lines.append("Evidence (likelihood ratio if it holds / if not):")
    lines += [f"  {e.when.source}   ×{e.lr:g} / ×{e.else_lr:g}" + ("  (confirms)" if e.confirms else "")
              for e in c.evidence]
    if c.not_this_when:
        lines += ["", f"Not this when: {c.not_this_when.strip()}"]
    lines += ["", "Fixes:"]
    for fid in c.fixes:
        if fid in kb.fixes:
            lines.append(_fix(kb.fixes[fid], indent="  "))
    lines.append(f"Sources: {'; '.join(c.sources)}")
    return "\n".join(lines) + "\n"


def _fix(f: Fix, indent: str = "") -> str:
    lines = [click.style(f"{indent}{f.id}: {f.title}", bold=True)]
    lines += [f"{indent}  - {step}" for step in f.steps]
    for attempt in f.did_not_work:
        lines.append(f"{indent}  did not work: {attempt.text} ({'; '.join(attempt.sources)})")
    lines.append(f"{indent}  sources: {'; '.join(f.sources)}")
    return "\n".join(lines) + "\n"


def _markdown(body: str) -> str:
    """Markdown as terminal text: headings bold, everything else as written (it is plain text)."""
    out = []
    for line in body.splitlines():
        out.append(click.style(line.lstrip("# "), bold=True, underline=True) if line.startswith("#") else line)
    return "\n".join(out) + "\n"
