"""Read rules/ and kb/ into a KnowledgeBase, collecting schema problems with file and line.

``loading.load()`` comes here only when its snapshot is stale; ``kb lint`` always does.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..errors import ArtifactError
from ..files import read_text
from . import cache, schema
from .expr import Expr, ExprError, split_template
from .layout import knowledge_files
from .model import Article, Cause, Check, Evidence, FactSpec, FindingSpec, Fix, KnowledgeBase, Risk, Sourced, Symptom
from .read_text import read_fact_rules, read_signatures
from .schema import Located, Problem

FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.S)
MAX_FILE_BYTES = 4 * 1024 * 1024  # the largest rules file is ~40 KB (docs/resource-policy.md)


def load_with_problems(root: Path) -> tuple[KnowledgeBase, list[Problem]]:
    kb, problems = KnowledgeBase(), []
    files = knowledge_files(root)
    parsed = ParseCache(root, [path for group in files.values() for path in group], problems)
    kb.fingerprint = parsed.fingerprint
    readers = {"facts": lambda doc, path: _read_fact_file(doc, kb, problems),
               "symptoms": lambda doc, path: _read_symptom(doc, path.stem, kb, problems),
               "findings": lambda doc, path: _read_findings(doc, kb, problems),
               "signatures": lambda doc, path: read_signatures(doc, kb, problems)}
    for kind, reader in readers.items():  # facts first: symptoms and signatures refer to them
        for path in files[kind]:
            doc = parsed.parse(path, problems)
            if doc is not None:
                reader(doc, path)
    for path in files["articles"]:
        _read_article(path, kb, problems, parsed)
    if not parsed.fresh:
        problems.extend(unknown_facts(kb))
    parsed.save(problems)
    return kb, problems


def unknown_facts(kb: KnowledgeBase) -> list[Problem]:
    """Facts that checks, evidence and fix steps read but nobody registered (a load problem: the
    engine would ask about, or compute with, a fact it has no type for)."""
    out = []
    for s in kb.symptoms.values():
        for i, check in enumerate(s.checks):
            for name in filter(None, (check.fact, check.after)):
                if name not in kb.facts:
                    out.append(Problem(s.file, check.line, f"checks[{i}]",
                                       f"unknown fact '{name}' (register it in rules/_facts/ or facts:)"))
        for cause in s.causes:
            for j, ev in enumerate(cause.evidence):
                for name in sorted(ev.when.facts - kb.facts.keys()):
                    out.append(Problem(s.file, ev.line, f"{cause.id}.evidence[{j}].when", f"unknown fact '{name}'"))
            for name in sorted(cause.risk.when.facts - kb.facts.keys()) if cause.risk else ():
                out.append(Problem(s.file, cause.risk.line, f"{cause.id}.risk.when", f"unknown fact '{name}'"))
        for key in ("observed_when", "contradicted_when"):
            for expr in getattr(s, key):
                for name in sorted(expr.facts - kb.facts.keys()):
                    out.append(Problem(s.file, 0, key, f"unknown fact '{name}'"))
    for spec in kb.facts.values():
        for name in sorted(spec.defined_when.facts - kb.facts.keys()) if spec.defined_when else ():
            out.append(Problem(spec.file, 0, f"{spec.name}.defined_when", f"unknown fact '{name}'"))
    for fix in kb.fixes.values():
        for j, step in enumerate(fix.steps):
            for _, source, _ in split_template(step):
                for name in sorted(Expr(source).facts - kb.facts.keys()) if source else ():
                    out.append(Problem(kb.symptoms[fix.symptom].file, fix.line, f"{fix.id}.steps[{j}]",
                                       f"unknown fact '{name}'"))
    return out


class ParseCache:
    """Parsed YAML (data and line numbers) as JSON in the user's cache folder.

    Parsing ~600 KB of rules costs more than the rest of `llmfix ask` together. The cache is keyed
    on every file's path and stamp (``cache.stamp``: an edit that keeps size and mtime re-parses
    too), and a warm start reads no knowledge file it does not need. It serves `kb lint` and a
    load whose snapshot is stale because the code changed (snapshot.py).
    """

    def __init__(self, root: Path, files: list[Path], problems: list[Problem]) -> None:
        self.root, self.problems = root, problems
        self.paths = {str(path.relative_to(root)): path for path in files}
        self._texts: dict[str, str | None] = {}
        self.key = [[rel, *cache.stamp(path)] for rel, path in self.paths.items()]
        self.fingerprint = cache.digest(json.dumps([str(root.resolve()), self.key]).encode())
        self.path = cache.path("parsed", str(root.resolve()).encode())
        saved = cache.load(self.path)
        self.fresh = _valid_cache(saved, self.key)
        self.entries: dict[str, dict | None] = saved["files"] if self.fresh else {}

    def text(self, rel: str) -> str | None:
        """A knowledge file's text, read once (None with the reason in ``problems``)."""
        if rel not in self._texts:
            self._texts[rel] = _read(self.paths[rel], rel, self.problems)
        return self._texts[rel]

    def parse(self, path: Path, problems: list[Problem]) -> Located | None:
        rel = str(path.relative_to(self.root))
        if self.fresh and rel in self.entries:
            try:
                return Located.cached(rel, **self.entries[rel]) if self.entries[rel] else None
            except (TypeError, ValueError):  # a damaged entry: parse the file again
                pass
        text = self.text(rel)
        doc = _parse(text, rel, problems) if text is not None else None
        self.entries[rel] = doc.to_cache() if doc is not None else None
        return doc

    def front_matter(self, rel: str, text: str, problems: list[Problem]) -> dict | None:
        """An article's front matter (YAML between --- lines), parsed once per edit."""
        if self.fresh and rel in self.entries:
            return self.entries[rel]
        doc = _parse(text, rel, problems, line=1)
        meta = doc.data if doc is not None else None
        self.entries[rel] = meta
        return meta

    def save(self, problems: list[Problem]) -> None:
        if self.fresh or problems:
            return  # knowledge with problems is never cached: its messages must come again
        cache.save(self.path, {"key": self.key, "files": self.entries})


def _valid_cache(saved: Any, key: list) -> bool:
    """A cache file is used only when it was written for exactly this content and has the outer
    shape ``save`` writes; an entry damaged inside is re-parsed by ``ParseCache.parse``."""
    return (isinstance(saved, dict) and saved.get("key") == key and isinstance(saved.get("files"), dict)
            and all(entry is None or isinstance(entry, dict) for entry in saved["files"].values()))


def _parse(text: str, rel: str, problems: list[Problem], line: int = 0) -> Located | None:
    """One YAML document; every problem becomes one line naming the file (and ``line`` + its line)."""
    import yaml

    try:
        doc = Located(text, rel)
    except schema.KnowledgeFileError as err:
        problems.append(Problem(rel, line + err.line, "", str(err)))
        return None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        what = " ".join(str(getattr(err, "problem", None) or err).split())
        problems.append(Problem(rel, line + mark.line + 1 if mark else line, "", f"YAML syntax error: {what}"))
        return None
    except RecursionError:
        problems.append(Problem(rel, line, "", "nested too deeply to read"))
        return None
    except ValueError as err:  # a value YAML cannot build: an integer of 5000 digits, a 13th month
        problems.append(Problem(rel, line, "", f"unreadable value: {' '.join(str(err).split())[:100]}"))
        return None
    if doc.data is None:
        problems.append(Problem(rel, line + 1, "", "empty file" if not line else "empty front matter"))
        return None
    return doc


def _read(path: Path, rel: str, problems: list[Problem]) -> str | None:
    """A knowledge file's text, or None with the reason added to ``problems``."""
    try:
        return read_text(path, MAX_FILE_BYTES)
    except ArtifactError as err:
        problems.append(Problem(rel, 0, "", err.problem))
        return None


def _add_fact(doc: Located, path: tuple, name: str, spec: Any, kb: KnowledgeBase, problems: list[Problem]) -> None:
    spec = schema.check_fact_spec(doc, path, name, spec, problems)
    if spec is None:
        return
    if name in kb.facts:
        problems.append(doc.problem(path + ("<key>",),
                                    f"duplicate fact '{name}' (first defined in {kb.facts[name].file})"))
        return
    kb.facts[name] = FactSpec(name, spec["type"], spec["description"], spec["choices"],
                              spec.get("unit", ""), doc.file,
                              _read_expr(doc, path + ("defined_when",), spec.get("defined_when"), problems),
                              other_run=spec.get("other_run", False))
    read_fact_rules(doc, path, spec, kb.facts[name], problems)


def _read_exprs(doc: Located, key: str, data: dict, problems: list[Problem]) -> list[Expr]:
    """``key: expr`` or ``key: [expr, ...]`` (any one holding counts)."""
    raw = data.get(key) or []
    items = [raw] if isinstance(raw, str) else schema.check_strings(doc, (key,), raw, "an expression", problems)
    exprs = [_read_expr(doc, (key, i), item, problems) for i, item in enumerate(items)]
    return [e for e in exprs if e is not None]


def _read_expr(doc: Located, path: tuple, source: str | None, problems: list[Problem]) -> Expr | None:
    """An optional expression field; a bad one is a problem naming the field, and reads as absent."""
    if not source:
        return None
    try:
        return Expr(source, check=not doc.validated)
    except ExprError as err:
        problems.append(doc.problem(path, str(err)))
        return None


def _read_fact_file(doc: Located, kb: KnowledgeBase, problems: list[Problem]) -> None:
    if not isinstance(doc.data, dict):
        problems.append(doc.problem((), "expected a mapping of fact name -> {type, description}"))
        return
    for name, spec in doc.data.items():
        _add_fact(doc, (name,), name, spec, kb, problems)


def _read_findings(doc: Located, kb: KnowledgeBase, problems: list[Problem]) -> None:
    if not isinstance(doc.data, dict):
        problems.append(doc.problem((), "expected a mapping of finding id -> {title, explanation}"))
        return
    for fid, spec in doc.data.items():
        if not schema.FACT_NAME.match(str(fid)):
            problems.append(doc.problem((fid, "<key>"), f"finding id '{fid}' must be dotted lower_snake, "
                                        "e.g. data.mask.non_binary"))
        elif schema.check_fields(doc, (fid,), spec, schema.FINDING, problems) and all(
                isinstance(spec.get(k), str) for k in schema.FINDING):
            kb.findings[fid] = FindingSpec(fid, spec["title"].strip(), spec["explanation"].strip(), doc.file,
                                           doc.line((fid,)))


def _read_symptom(doc: Located, stem: str, kb: KnowledgeBase, problems: list[Problem]) -> None:
    data = schema.check_fields(doc, (), doc.data, schema.SYMPTOM, problems)
    if data is None:
        return
    sid = data.get("id")
    if sid != stem:
        problems.append(doc.problem(("id",), f"id '{sid}' must equal the file name '{stem}'"))
    if not isinstance(sid, str) or not schema.SYMPTOM_ID.match(sid):
        return
    if sid in kb.symptoms:
        problems.append(doc.problem(("id",), f"duplicate symptom id '{sid}'"))
        return
    for name, spec in (data.get("facts") or {}).items():
        _add_fact(doc, ("facts", name), name, spec, kb, problems)
    symptom = Symptom(sid, str(data.get("title", "")), str(data.get("summary", "")),
                      _read_aliases(doc, data.get("aliases"), problems), file=doc.file,
                      observed_when=_read_exprs(doc, "observed_when", data, problems),
                      contradicted_when=_read_exprs(doc, "contradicted_when", data, problems))
    for i, raw in enumerate(data.get("checks") or []):
        raw = schema.check_fields(doc, ("checks", i), raw, schema.CHECK, problems)
        if raw is not None and raw.get("fact") and raw.get("ask"):
            symptom.checks.append(Check(raw["fact"], raw["ask"], sid, raw.get("how", ""),
                                        raw.get("probe", ""), raw.get("cost", 2), raw.get("after", ""),
                                        doc.line(("checks", i))))
    symptom.causes = _read_unique(doc, "causes", data, sid, _read_cause, kb.causes, "cause", problems)
    _read_unique(doc, "fixes", data, sid, _read_fix, kb.fixes, "fix", problems)
    kb.symptoms[sid] = symptom


def _read_unique(doc: Located, section: str, data: dict, sid: str, reader, table: dict, kind: str,
                 problems: list[Problem]) -> list:
    """Read causes or fixes into the global ``table``; a second item with an id is a problem."""
    items = []
    for i, raw in enumerate(data.get(section) or []):
        item = reader(doc, (section, i), raw, sid, problems)
        if item is None:
            continue
        if item.id in table:
            first = getattr(table[item.id], "symptom", "")
            problems.append(doc.problem((section, i, "id"), f"duplicate {kind} id '{item.id}' (first in {first})"))
            continue
        table[item.id] = item
        items.append(item)
    return items


def _read_aliases(doc: Located, raw: Any, problems: list[Problem]) -> dict[str, list[str]]:
    if not isinstance(raw, dict):
        return {}
    out = {}
    for group, items in raw.items():
        if group not in schema.ALIAS_GROUPS:
            problems.append(doc.problem(("aliases", group, "<key>"),
                                        f"unknown alias group '{group}' (expected {', '.join(schema.ALIAS_GROUPS)})"))
            continue
        out[group] = schema.check_strings(doc, ("aliases", group), items, "an alias", problems)
    return out


def _read_cause(doc: Located, path: tuple, raw: Any, sid: str, problems: list[Problem]) -> Cause | None:
    raw = schema.check_fields(doc, path, raw, schema.CAUSE, problems)
    if raw is None:
        return None
    cid = raw.get("id")
    if not isinstance(cid, str) or not schema.CAUSE_ID.match(cid) or not cid.startswith(sid + "."):
        problems.append(doc.problem(path + ("id",), f"expected a cause id '{sid}.<kebab-case>', got {cid!r}"))
        return None
    prior = raw.get("prior", 0.1)
    if not 0 < prior < 1:
        problems.append(doc.problem(path + ("prior",), f"expected a number between 0 and 1 (exclusive), got {prior!r}"))
        prior = 0.1
    cause = Cause(cid, sid, str(raw.get("title", "")), float(prior), raw.get("summary", ""),
                  fixes=schema.check_strings(doc, path + ("fixes",), raw.get("fixes"), "a fix id", problems),
                  sources=schema.check_strings(doc, path + ("sources",), raw.get("sources"), "a source", problems),
                  not_this_when=raw.get("not_this_when", ""),
                  reported_as=_read_sourced(doc, path + ("reported_as",), raw.get("reported_as"), problems),
                  same_fault=schema.check_strings(doc, path + ("same_fault",), raw.get("same_fault"), "a cause id",
                                                  problems),
                  risk=_read_risk(doc, path + ("risk",), raw.get("risk"), problems),
                  line=doc.line(path))
    for j, item in enumerate(raw.get("evidence") or []):
        evidence = _read_evidence(doc, path + ("evidence", j), item, problems)
        if evidence:
            cause.evidence.append(evidence)
    return cause


def _read_evidence(doc: Located, path: tuple, raw: Any, problems: list[Problem]) -> Evidence | None:
    raw = schema.check_fields(doc, path, raw, schema.EVIDENCE, problems)
    if raw is None or "when" not in raw or "lr" not in raw:
        return None
    for key in ("lr", "else_lr"):
        value = raw.get(key, 1.0)
        if not 1e-6 <= value <= 1e6:
            problems.append(doc.problem(path + (key,),
                                        f"expected a likelihood ratio between 1e-6 and 1e6, got {value!r}"))
            return None
    when = _condition(doc, path, raw, problems)
    if when is None:
        return None
    return Evidence(when, float(raw["lr"]), float(raw.get("else_lr", 1.0)), bool(raw.get("confirms", False)),
                    raw.get("says", ""), doc.line(path))


def _read_risk(doc: Located, path: tuple, raw: Any, problems: list[Problem]) -> Risk | None:
    if raw is None:
        return None
    raw = schema.check_fields(doc, path, raw, schema.RISK, problems)
    if raw is None or not raw.get("when") or not raw.get("says"):
        return None
    when = _condition(doc, path, raw, problems)
    return Risk(when, str(raw["says"]), doc.line(path)) if when is not None else None


def _condition(doc: Located, path: tuple, raw: dict, problems: list[Problem]) -> Expr | None:
    """The item's ``when`` as an expression, or None with the problem recorded at its line."""
    try:
        return Expr(str(raw.get("when", "")), check=not doc.validated)
    except ExprError as err:
        problems.append(doc.problem(path + ("when",), str(err)))
        return None


def _read_fix(doc: Located, path: tuple, raw: Any, sid: str, problems: list[Problem]) -> Fix | None:
    raw = schema.check_fields(doc, path, raw, schema.FIX, problems)
    if raw is None:
        return None
    fid = raw.get("id")
    if not isinstance(fid, str) or not schema.FIX_ID.match(fid):
        problems.append(doc.problem(path + ("id",), f"expected a fix id 'fix-<kebab-case>', got {fid!r}"))
        return None
    steps = schema.check_strings(doc, path + ("steps",), raw.get("steps"), "a step", problems)
    steps = [step for j, step in enumerate(steps)
             if doc.validated or _template_ok(doc, path + ("steps", j), step, problems)]
    return Fix(fid, str(raw.get("title", "")), steps,
               schema.check_strings(doc, path + ("sources",), raw.get("sources"), "a source", problems),
               sid, _read_sourced(doc, path + ("did_not_work",), raw.get("did_not_work"), problems), doc.line(path))


def _read_sourced(doc: Located, path: tuple, raw: Any, problems: list[Problem]) -> list[Sourced]:
    """A list of {text, sources} (a fix's did_not_work, a cause's reported_as)."""
    out = []
    for j, item in enumerate(raw or []):
        item = schema.check_fields(doc, path + (j,), item, schema.SOURCED, problems)
        if item is not None and item.get("text"):
            out.append(Sourced(item["text"], schema.check_strings(
                doc, path + (j, "sources"), item.get("sources"), "a source", problems)))
    return out


def _template_ok(doc: Located, path: tuple, step: str, problems: list[Problem]) -> bool:
    """Whether every {{ expr :fmt }} slot of a fix step parses (a bad step is left out)."""
    try:
        for _, source, _ in split_template(step):
            if source:
                Expr(source)
    except ExprError as err:
        problems.append(doc.problem(path, str(err)))
        return False
    return True


def _read_article(path: Path, kb: KnowledgeBase, problems: list[Problem], parsed: ParseCache) -> None:
    rel = str(path.relative_to(parsed.root))
    text = parsed.text(rel)
    if text is None:
        parsed.entries[rel] = None
        return
    match = FRONT_MATTER.match(text)
    if not match:
        problems.append(Problem(rel, 1, "", "missing front matter (--- id: ..., title: ... ---)"))
        parsed.entries[rel] = None
        return
    meta = parsed.front_matter(rel, match.group(1), problems)
    if meta is None:
        return
    if not isinstance(meta, dict) or meta.get("id") != path.stem or not meta.get("title"):
        problems.append(Problem(rel, 2, "front matter", f"needs id: {path.stem} and a title"))
        return
    body = text[match.end():]
    sections = [line[3:].strip() for line in body.splitlines() if line.startswith("## ")]
    kb.articles[path.stem] = Article(path.stem, str(meta["title"]), body, rel, sections)
