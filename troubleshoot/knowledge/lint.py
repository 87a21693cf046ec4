"""`llmfix kb lint`: cross-reference checks on top of the schema checks done while loading.

Catches unknown facts / causes / fixes, duplicate ids (at load), unreachable checks, `after`
cycles, causes without fixes, fixes without sources, symptoms without an article, articles
without their fixed sections, contract ids from DESIGN.md that are missing, and breaks of the
rules <-> probes contract: a check whose ``probe:`` hint no probe can answer, a fact two probes
publish with no merge rule.
"""
from __future__ import annotations

from pathlib import Path

from .. import contracts
from .read import knowledge_root, load_with_problems
from .model import KnowledgeBase
from .schema import Problem


def lint(root: Path | None = None) -> list[Problem]:
    root = root or knowledge_root()
    kb, problems = load_with_problems(root)
    for check in (_references, _reachable_checks, _after_cycles, _articles, _contracts, _probe_contract):
        problems.extend(check(kb))
    return problems


def _references(kb: KnowledgeBase) -> list[Problem]:
    out, used = [], set()
    for cause in kb.causes.values():
        file = kb.symptoms[cause.symptom].file
        if not cause.fixes:
            out.append(Problem(file, cause.line, cause.id, "cause has no fixes"))
        if not cause.sources:
            out.append(Problem(file, cause.line, cause.id, "cause has no sources"))
        if not cause.evidence:
            out.append(Problem(file, cause.line, cause.id, "cause has no evidence: no answer or probe can move it"))
        for fid in cause.fixes:
            used.add(fid)
            if fid not in kb.fixes:
                out.append(Problem(file, cause.line, f"{cause.id}.fixes", f"unknown fix '{fid}'"))
    for fix in kb.fixes.values():
        file = kb.symptoms[fix.symptom].file
        if not fix.sources:
            out.append(Problem(file, fix.line, fix.id, "fix has no sources"))
        if not fix.steps:
            out.append(Problem(file, fix.line, fix.id, "fix has no steps"))
        if fix.id not in used:
            out.append(Problem(file, fix.line, fix.id, "fix is not used by any cause"))
    return out


def _reachable_checks(kb: KnowledgeBase) -> list[Problem]:
    """A check is unreachable when no cause of any symptom reads its fact, or it waits on a fact
    that nothing can ever set (no check asks it and it is not in the probe registry)."""
    read = {name for c in kb.causes.values() for ev in c.evidence for name in ev.when.facts}
    out = []
    for s in kb.symptoms.values():
        for i, check in enumerate(s.checks):
            if check.fact not in read:
                out.append(Problem(s.file, check.line, f"checks[{i}]", f"unreachable check: no cause's evidence reads '{check.fact}'"))
    return out


def _after_cycles(kb: KnowledgeBase) -> list[Problem]:
    after = {c.fact: (c.after, s.file) for s in kb.symptoms.values() for c in s.checks if c.after}
    out = []
    for start, (_, file) in after.items():
        seen, node = [start], after[start][0]
        while node in after:
            if node == start:
                out.append(Problem(file, 0, "checks", f"cycle in 'after': {' -> '.join(seen + [node])}"))
                break
            if node in seen:
                break
            seen.append(node)
            node = after[node][0]
    return out


def _articles(kb: KnowledgeBase) -> list[Problem]:
    out = []
    for sid, s in kb.symptoms.items():
        article = kb.articles.get(sid)
        if article is None:
            out.append(Problem(s.file, 0, "", f"symptom '{sid}' has no article kb/{sid}.md"))
            continue
        for section in contracts.ARTICLE_SECTIONS:
            if section not in article.sections:
                out.append(Problem(article.file, 0, "", f"missing section '## {section}'"))
    return out


def _contracts(kb: KnowledgeBase) -> list[Problem]:
    out = [Problem("rules/", 0, "", f"required symptom '{sid}' is missing (DESIGN.md)")
           for sid in contracts.SYMPTOM_IDS if sid not in kb.symptoms]
    out += [Problem("rules/", 0, "", f"required cause '{cid}' is missing (DESIGN.md)")
            for cid in contracts.CAUSE_IDS if cid not in kb.causes]
    return out


def _probe_contract(kb: KnowledgeBase) -> list[Problem]:
    from ..probes import SHARED_FACTS, publishes

    out = []
    declared = publishes()
    producers: dict[str, list[str]] = {}
    for family, facts in declared.items():
        for name in facts:
            producers.setdefault(name, []).append(family)
    out += [Problem("troubleshoot/probes/__init__.py", 0, "SHARED_FACTS", f"fact '{name}' is published by "
                    f"{' and '.join(fams)} but has no merge rule") for name, fams in sorted(producers.items())
            if len(fams) > 1 and name not in SHARED_FACTS]
    for s in kb.symptoms.values():
        for i, check in enumerate(s.checks):
            if check.probe and check.fact not in producers:
                out.append(Problem(s.file, check.line, f"checks[{i}].probe", f"no probe publishes '{check.fact}': "
                                   "drop the hint or make a probe publish it (and list it in its PUBLISHES)"))
    return out
