"""Read rules/ and kb/ into a KnowledgeBase, collecting schema problems with file and line.

The knowledge ships inside the wheel as ``troubleshoot/rules`` and ``troubleshoot/kb``; in a source
checkout the top-level ``rules/`` and ``kb/`` are read directly.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable


from ..errors import LlmfixError
from . import schema
from .expr import Expr, ExprError, split_template
from .read_text import read_fact_rules, read_signatures
from .model import (Article, Cause, Check, Evidence, FactSpec, Fix, FixAttempt, KnowledgeBase,
                    Symptom)
from .schema import Located, Problem

FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.S)


def knowledge_root() -> Path:
    """The folder holding rules/ and kb/: $LLMFIX_KNOWLEDGE (your own knowledge tree), the source
    checkout, or the installed package."""
    override = os.environ.get("LLMFIX_KNOWLEDGE")
    if override:
        if not (Path(override) / "rules").is_dir():
            raise LlmfixError(f"{override}: LLMFIX_KNOWLEDGE must name a folder holding rules/ and kb/")
        return Path(override)
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "rules").is_dir() and (checkout / "kb").is_dir():
        return checkout
    spec = importlib.util.find_spec("troubleshoot.rules")
    if spec and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).parent
    raise LlmfixError("knowledge not found: neither rules/ beside the package nor troubleshoot.rules installed")


@lru_cache(maxsize=4)
def load(root: str | None = None, strict: bool = True) -> KnowledgeBase:
    """Load the knowledge base; with ``strict`` a schema problem is an error (exit 2)."""
    kb, problems = load_with_problems(Path(root) if root else knowledge_root())
    if strict and problems:
        more = f" (and {len(problems) - 1} more; run `llmfix kb lint`)" if len(problems) > 1 else ""
        raise LlmfixError(f"{problems[0]}{more}")
    return kb


def load_with_problems(root: Path) -> tuple[KnowledgeBase, list[Problem]]:
    kb, problems = KnowledgeBase(), []
    rules = root / "rules"
    fact_files, rule_files = sorted((rules / "_facts").glob("*.yaml")), sorted(rules.glob("*.yaml"))
    signature_files = sorted((rules / "_signatures").glob("*.yaml"))
    articles = sorted((root / "kb").glob("*.md"))
    cache = ParseCache(root, fact_files + rule_files + signature_files + articles)
    kb.fingerprint = cache.fingerprint
    for path in fact_files:
        doc = cache.parse(path, problems)
        if doc is not None:
            _read_fact_file(doc, kb, problems)
    for path in rule_files:
        doc = cache.parse(path, problems)
        if doc is not None:
            _read_symptom(doc, path.stem, kb, problems)
    for path in signature_files:
        doc = cache.parse(path, problems)
        if doc is not None:
            read_signatures(doc, kb, problems)
    for path in articles:
        _read_article(path, root, kb, problems, cache)
    cache.save(problems)
    return kb, problems


class ParseCache:
    """Parsed YAML (data and line numbers) as JSON in the user's cache folder.

    Parsing ~1 MB of rules costs more than the rest of `llmfix ask` together; the cache is keyed
    on every file's path, size and mtime, so any edit re-parses. Unwritable cache: no cache.
    """

    def __init__(self, root: Path, files: list[Path]) -> None:
        self.root = root
        self.key = [[str(p.relative_to(root)), st.st_size, st.st_mtime_ns] for p in files for st in [p.stat()]]
        self.fingerprint = hashlib.sha1(json.dumps([str(root.resolve()), self.key]).encode()).hexdigest()[:16]
        self.path = cache_dir() / f"parsed-{hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:16]}.json"
        self.entries: dict[str, dict] = {}
        self.fresh = False
        try:
            saved = json.loads(self.path.read_text(encoding="utf-8"))
            if saved.get("key") == self.key:
                self.entries, self.fresh = saved["files"], True
        except (OSError, ValueError, KeyError, AttributeError):
            pass

    def parse(self, path: Path, problems: list[Problem]) -> Located | None:
        rel = str(path.relative_to(self.root))
        if self.fresh and rel in self.entries:
            return Located.cached(rel, **self.entries[rel])
        doc = _parse(path, self.root, problems)
        self.entries[rel] = doc.to_cache() if doc is not None else None
        return doc

    def front_matter(self, rel: str, text: str, problems: list[Problem]) -> dict | None:
        """An article's front matter (YAML between --- lines), parsed once per edit."""
        if self.fresh and rel in self.entries:
            return self.entries[rel]
        import yaml

        meta = None
        try:
            meta = yaml.safe_load(text) or {}
        except yaml.YAMLError as err:
            problems.append(Problem(rel, 2, "front matter", f"YAML syntax error: {err}"))
        self.entries[rel] = meta
        return meta

    def save(self, problems: list[Problem]) -> None:
        if self.fresh or problems:
            return  # knowledge with problems is never cached: its messages must come again
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"key": self.key, "files": self.entries}), encoding="utf-8")
            tmp.replace(self.path)
        except (OSError, TypeError, ValueError):
            pass  # read-only home, or a YAML value JSON cannot hold: simply no cache


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llmfix"


def memo(kb: KnowledgeBase, name: str, build: Callable[[], Any], code: str) -> Any:
    """A JSON-able value derived from the knowledge (the matcher's index), cached per knowledge
    fingerprint and per version of the ``code`` file that builds it."""
    st = Path(code).stat()
    version = hashlib.sha1(f"{kb.fingerprint}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    path = cache_dir() / f"{name}-{version}.json"
    if kb.fingerprint:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
    value = build()
    if kb.fingerprint:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
            tmp.replace(path)
        except OSError:
            pass
    return value


def _parse(path: Path, root: Path, problems: list[Problem]) -> Located | None:
    import yaml

    rel = str(path.relative_to(root))
    try:
        doc = Located(path.read_text(encoding="utf-8"), rel)
    except UnicodeDecodeError:
        problems.append(Problem(rel, 0, "", "not UTF-8 text"))
        return None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problems.append(Problem(rel, mark.line + 1 if mark else 0, "", f"YAML syntax error: {getattr(err, 'problem', err)}"))
        return None
    if doc.data is None:
        problems.append(Problem(rel, 1, "", "empty file"))
        return None
    return doc


def _add_fact(doc: Located, path: tuple, name: str, spec: Any, kb: KnowledgeBase, problems: list[Problem]) -> None:
    if not schema.check_fact_spec(doc, path, name, spec, problems):
        return
    if name in kb.facts:
        problems.append(doc.problem(path + ("<key>",), f"duplicate fact '{name}' (first defined in {kb.facts[name].file})"))
        return
    kb.facts[name] = FactSpec(name, spec["type"], spec["description"], list(spec.get("choices") or []),
                              spec.get("unit", ""), doc.file)
    read_fact_rules(doc, path, spec, kb.facts[name], problems)


def _read_fact_file(doc: Located, kb: KnowledgeBase, problems: list[Problem]) -> None:
    if not isinstance(doc.data, dict):
        problems.append(doc.problem((), "expected a mapping of fact name -> {type, description}"))
        return
    for name, spec in doc.data.items():
        _add_fact(doc, (name,), name, spec, kb, problems)


def _read_symptom(doc: Located, stem: str, kb: KnowledgeBase, problems: list[Problem]) -> None:
    data = doc.data
    if not schema.check_fields(doc, (), data, schema.SYMPTOM, problems):
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
                      _read_aliases(doc, data.get("aliases"), problems), file=doc.file)
    for i, raw in enumerate(data.get("checks") or []):
        if schema.check_fields(doc, ("checks", i), raw, schema.CHECK, problems):
            symptom.checks.append(Check(raw.get("fact", ""), raw.get("ask", ""), sid, raw.get("how", ""),
                                        raw.get("probe", ""), int(raw.get("cost", 2) or 2), raw.get("after", ""),
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
    if not schema.check_fields(doc, path, raw, schema.CAUSE, problems):
        return None
    cid = raw.get("id")
    if not isinstance(cid, str) or not schema.CAUSE_ID.match(cid) or not cid.startswith(sid + "."):
        problems.append(doc.problem(path + ("id",), f"expected a cause id '{sid}.<kebab-case>', got {cid!r}"))
        return None
    prior = raw.get("prior")
    if not isinstance(prior, (int, float)) or not 0 < prior < 1:
        problems.append(doc.problem(path + ("prior",), f"expected a number between 0 and 1 (exclusive), got {prior!r}"))
        prior = 0.1
    cause = Cause(cid, sid, str(raw.get("title", "")), float(prior), raw.get("summary", ""),
                  fixes=schema.check_strings(doc, path + ("fixes",), raw.get("fixes"), "a fix id", problems),
                  sources=schema.check_strings(doc, path + ("sources",), raw.get("sources"), "a source", problems),
                  not_this_when=raw.get("not_this_when", ""), line=doc.line(path))
    for j, item in enumerate(raw.get("evidence") or []):
        evidence = _read_evidence(doc, path + ("evidence", j), item, problems)
        if evidence:
            cause.evidence.append(evidence)
    return cause


def _read_evidence(doc: Located, path: tuple, raw: Any, problems: list[Problem]) -> Evidence | None:
    if not schema.check_fields(doc, path, raw, schema.EVIDENCE, problems):
        return None
    for key in ("lr", "else_lr"):
        value = raw.get(key, 1.0)
        if not isinstance(value, (int, float)) or value <= 0:
            problems.append(doc.problem(path + (key,), f"expected a likelihood ratio > 0, got {value!r}"))
            return None
    try:
        when = Expr(str(raw.get("when", "")), check=not doc.validated)
    except ExprError as err:
        problems.append(doc.problem(path + ("when",), str(err)))
        return None
    return Evidence(when, float(raw["lr"]), float(raw.get("else_lr", 1.0)), bool(raw.get("confirms", False)),
                    raw.get("says", ""), doc.line(path))


def _read_fix(doc: Located, path: tuple, raw: Any, sid: str, problems: list[Problem]) -> Fix | None:
    if not schema.check_fields(doc, path, raw, schema.FIX, problems):
        return None
    fid = raw.get("id")
    if not isinstance(fid, str) or not schema.FIX_ID.match(fid):
        problems.append(doc.problem(path + ("id",), f"expected a fix id 'fix-<kebab-case>', got {fid!r}"))
        return None
    steps = schema.check_strings(doc, path + ("steps",), raw.get("steps"), "a step", problems)
    for j, step in enumerate(steps if not doc.validated else ()):
        try:
            for _, source, _ in split_template(step):
                if source:
                    Expr(source)
        except ExprError as err:
            problems.append(doc.problem(path + ("steps", j), str(err)))
    attempts = []
    for j, item in enumerate(raw.get("did_not_work") or []):
        if schema.check_fields(doc, path + ("did_not_work", j), item, schema.ATTEMPT, problems):
            attempts.append(FixAttempt(item.get("text", ""), list(item.get("sources") or [])))
    return Fix(fid, str(raw.get("title", "")), steps,
               schema.check_strings(doc, path + ("sources",), raw.get("sources"), "a source", problems),
               sid, attempts, doc.line(path))


def _read_article(path: Path, root: Path, kb: KnowledgeBase, problems: list[Problem], cache: ParseCache) -> None:
    rel = str(path.relative_to(root))
    text = path.read_text(encoding="utf-8")
    match = FRONT_MATTER.match(text)
    if not match:
        problems.append(Problem(rel, 1, "", "missing front matter (--- id: ..., title: ... ---)"))
        cache.entries[rel] = None
        return
    meta = cache.front_matter(rel, match.group(1), problems)
    if meta is None:
        return
    if not isinstance(meta, dict) or meta.get("id") != path.stem or not meta.get("title"):
        problems.append(Problem(rel, 2, "front matter", f"needs id: {path.stem} and a title"))
        return
    body = text[match.end():]
    sections = [line[3:].strip() for line in body.splitlines() if line.startswith("## ")]
    kb.articles[path.stem] = Article(path.stem, str(meta["title"]), body, rel, sections)
