"""`llmfix kb lint`: cross-reference checks on top of the schema checks done while loading.

Catches unknown facts / causes / fixes, duplicate ids (at load), unreachable checks, `after`
cycles, causes without fixes, fixes without sources, symptoms without an article, articles
without their fixed sections, contract ids from DESIGN.md that are missing; breaks of the
rules <-> probes contract (a check whose ``probe:`` hint no probe can answer, a fact two probes
publish with no merge rule, a finding id the code reports that rules/_findings.yaml does not
explain, and a catalogue entry no code reports); and calibration slips: a prior below the floor,
one evidence item repeating another's condition (counted twice), and citations a user cannot
open (docs/calibration.md, docs/knowledge-format.md).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from .. import contracts
from .layout import knowledge_root
from .lint_text import text_rules
from .model import KnowledgeBase
from .read import load_with_problems
from .schema import Problem


def lint(root: Path | None = None) -> list[Problem]:
    root = root or knowledge_root()
    kb, problems = load_with_problems(root)
    for check in (_references, _reachable_checks, _after_cycles, _articles, _contracts, _probe_contract,
                  _findings_catalogued, _prior_floor, _double_counting, _public_sources, _public_articles,
                  _short_reports, text_rules):
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
        for twin in cause.same_fault:
            if twin not in kb.causes:
                out.append(Problem(file, cause.line, f"{cause.id}.same_fault", f"unknown cause '{twin}'"))
            elif kb.causes[twin].symptom == cause.symptom:
                out.append(Problem(file, cause.line, f"{cause.id}.same_fault",
                                   f"'{twin}' is a sibling under the same symptom: same_fault names "
                                   "the fault's cause under another symptom"))
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
                out.append(Problem(s.file, check.line, f"checks[{i}]",
                                   f"unreachable check: no cause's evidence reads '{check.fact}'"))
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
    from ..probes import SHARED_FACTS, WRITTEN, publishes

    out = []
    declared = publishes()
    producers: dict[str, list[str]] = {}
    for family, facts in declared.items():
        for name in facts if f"probe:{family}" not in WRITTEN else ():  # what people wrote yields to any probe
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


MAX_REPORT_PHRASE = 200
PRIOR_FLOOR = 0.03  # docs/calibration.md: below it a prior alone reads as "ruled out"
# Files users cannot open: the seed documents (NNN_<16 hex>.txt) and the project's own notes.
PRIVATE = re.compile(r"\b\d{3}_[0-9a-f]{16}\.txt\b|\bKNOWLEDGE\.md\b|\bDESIGN\.md\b")


def _prior_floor(kb: KnowledgeBase) -> list[Problem]:
    return [Problem(kb.symptoms[c.symptom].file, c.line, f"{c.id}.prior",
                    f"prior {c.prior:g} is below the floor {PRIOR_FLOOR:g}")
            for c in kb.causes.values() if c.prior < PRIOR_FLOOR]


def _conjuncts(source: str) -> frozenset[str]:
    tree = ast.parse(source, mode="eval").body
    parts = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]
    return frozenset(ast.unparse(p) for p in parts)


def _double_counting(kb: KnowledgeBase) -> list[Problem]:
    """An item whose condition is part of another item's `and` counts the same fact twice. An
    item of ratio 1 both ways counts nothing (it only confirms: "nothing trainable, in a LoRA
    run"), so it may repeat what the others count."""
    out = []
    for cause in kb.causes.values():
        parts = [_conjuncts(ev.when.source) for ev in cause.evidence]
        counts = [ev.lr != 1 or ev.else_lr != 1 for ev in cause.evidence]
        for i, small in enumerate(parts):
            for j, big in enumerate(parts):
                if i != j and small < big and counts[i] and counts[j]:
                    out.append(Problem(kb.symptoms[cause.symptom].file, cause.evidence[j].line,
                                       f"{cause.id}.evidence[{j}].when",
                                       f"repeats evidence[{i}] ({cause.evidence[i].when.source}): counted twice"))
    return out


def _public_sources(kb: KnowledgeBase) -> list[Problem]:
    """Sources are links a user can open: https URLs, never seed files or internal notes."""
    out = []
    items = [(c.id, c.line, kb.symptoms[c.symptom].file, c.cited()) for c in kb.causes.values()]
    items += [(f.id, f.line, kb.symptoms[f.symptom].file, [*f.sources, *(s for a in f.did_not_work for s in a.sources)])
              for f in kb.fixes.values()]
    for owner, line, file, sources in items:
        for source in sources:
            if PRIVATE.search(source) or not source.startswith("https://"):
                out.append(Problem(file, line, f"{owner}.sources",
                                   f"'{source}' is not a public link (cite the https URL of the public origin)"))
    return out


def _short_reports(kb: KnowledgeBase) -> list[Problem]:
    """A `reported_as` line is how one report put the fault: a phrase, not a post (quoted at most
    in part; the words are what the lexical evidence reads)."""
    return [Problem(kb.symptoms[c.symptom].file, c.line, f"{c.id}.reported_as[{j}]",
                    f"{len(r.text)} characters: a report phrase is at most {MAX_REPORT_PHRASE}")
            for c in kb.causes.values() for j, r in enumerate(c.reported_as) if len(r.text) > MAX_REPORT_PHRASE]


def _public_articles(kb: KnowledgeBase) -> list[Problem]:
    out = []
    for article in kb.articles.values():
        for m in PRIVATE.finditer(f"{article.title}\n{article.body}"):
            out.append(Problem(article.file, 0, "", f"cites '{m.group(0)}', which users cannot open"))
    return out


def _findings_catalogued(kb: KnowledgeBase) -> list[Problem]:
    from .layout import FINDINGS_FILE
    from .reported import finding_ids

    if not kb.findings:
        return []  # a knowledge tree of one's own may leave the catalogue out
    file = next(iter(kb.findings.values())).file
    reported = finding_ids()
    out = [Problem(file, 0, fid, f"finding id reported by troubleshoot/{where} has no entry in rules/{FINDINGS_FILE}")
           for fid, where in sorted(reported.items()) if fid not in kb.findings]
    out += [Problem(f.file, f.line, fid, "no code reports this finding id any more")
            for fid, f in sorted(kb.findings.items()) if fid not in reported]
    return out
