"""`llmfix site build OUT` and `llmfix site serve`: the knowledge base as a static, offline website.

Pages (stable URLs from ids, all links relative, so it works from file:// and any static host)::

    index.html                 symptoms, search, the lessons of the seed postmortems
    symptoms/<id>.html         article + decision tree (SVG) + interactive troubleshooter
    causes/<id>.html           evidence with its likelihood ratios, checks, fixes, sources
    fixes/<id>.html            steps (numbers computed in the browser), what did not work
    articles/<id>.html         shared-topic articles of kb/ that are not a symptom
    findings/<id>.html         what a probe finding means (rules/_findings.yaml)
    facts.html, sources.html   every fact, every source string and who cites it
    data/*.js                  the exported index and rules (window.LLMFIX_*), see export.py
    static/                    style.css, llmfix.js (matcher + engine port), ui.js (the page)

Nothing is fetched at run time and nothing comes from outside: no fonts, CDNs or analytics.
"""
from __future__ import annotations

import functools
import http.server
import re
import shutil
import signal
import socketserver
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from .. import __version__
from ..engine import State, rank
from ..errors import ArtifactError, LlmfixError
from ..files import readable_folder
from ..knowledge.expr import Expr, ExprError, split_template
from ..knowledge.model import Cause, Fix, KnowledgeBase
from . import export
from .markup import Markdown, slug, source_anchor, source_html
from .svg import decision_tree, tree_model

HERE = Path(__file__).resolve().parent
MARKER = ".llmfix-site"
GENERATED = ("index.html", "facts.html", "sources.html", "symptoms", "causes", "fixes", "articles",
             "findings", "data", "static")
SEED = re.compile(r"\b\d{3}_[0-9a-f]{16}\.txt\b")
CONFIG = HERE / "site.yaml"


class SiteError(LlmfixError, click.ClickException):
    """The site cannot be built or served here; the CLI prints ``Error: ...`` and exits 2."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        click.ClickException.__init__(self, message)


# --------------------------------------------------------------------------- what cites what
@dataclass
class Citations:
    causes: list[Cause] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)
    attempts: list[tuple[Fix, str]] = field(default_factory=list)
    articles: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.causes) + len(self.fixes) + len(self.attempts)


def citations(kb: KnowledgeBase) -> dict[str, Citations]:
    """Every source string -> the causes, fixes and failed attempts citing it (seeds first)."""
    table: dict[str, Citations] = {}
    for cause in kb.causes.values():
        for src in dict.fromkeys(cause.cited()):
            table.setdefault(src, Citations()).causes.append(cause)
    for fix in kb.fixes.values():
        for src in dict.fromkeys(fix.sources):
            table.setdefault(src, Citations()).fixes.append(fix)
        for attempt in fix.did_not_work:
            for src in dict.fromkeys(attempt.sources):
                table.setdefault(src, Citations()).attempts.append((fix, attempt.text))
    for src, cited in table.items():
        for seed in SEED.findall(src):
            cited.articles += [a.id for a in kb.articles.values() if seed in a.body and a.id not in cited.articles]
    return dict(sorted(table.items(), key=lambda kv: (not SEED.search(kv[0]), kv[0].casefold())))


# How the articles' reference lists name a seed: "- LiBai FAQ: 000_….txt (…)" or
# "- Seed 001_….txt (OPT: …)"; the most frequent label becomes the seed's display name.
_SEED_LABELS = (re.compile(r"^\s*[-*]\s+([^:\n()]{3,60}):\s+(?:seed\s+)?(\d{3}_[0-9a-f]{16}\.txt)", re.M | re.I),
                re.compile(r"^\s*[-*]\s+seed\s+(\d{3}_[0-9a-f]{16}\.txt)\s+\(([^:\n()]{2,40}):", re.M | re.I))


def seed_names(kb: KnowledgeBase) -> dict[str, str]:
    """seed file -> the name the articles give it, when they give one."""
    votes: dict[str, Counter] = {}
    for article in kb.articles.values():
        for name, seed in _SEED_LABELS[0].findall(article.body):
            votes.setdefault(seed, Counter())[name.strip()] += 1
        for seed, name in _SEED_LABELS[1].findall(article.body):
            votes.setdefault(seed, Counter())[name.strip()] += 1
    return {seed: counter.most_common(1)[0][0] for seed, counter in votes.items()}


@dataclass
class SeedLesson:
    seed: str
    name: str = ""
    worked: list[Fix] = field(default_factory=list)
    failed: list[tuple[Fix, str]] = field(default_factory=list)
    causes: list[Cause] = field(default_factory=list)


def seed_lessons(kb: KnowledgeBase) -> list[SeedLesson]:
    """The key lessons of each seed document, read off the knowledge that cites it."""
    lessons: dict[str, SeedLesson] = {}

    names = seed_names(kb)

    def get(seed: str) -> SeedLesson:
        return lessons.setdefault(seed, SeedLesson(seed, names.get(seed, "")))

    for cause in kb.causes.values():
        for seed in dict.fromkeys(s for src in cause.sources for s in SEED.findall(src)):
            get(seed).causes.append(cause)
    for fix in kb.fixes.values():
        for seed in dict.fromkeys(s for src in fix.sources for s in SEED.findall(src)):
            get(seed).worked.append(fix)
        for attempt in fix.did_not_work:
            for seed in dict.fromkeys(s for src in attempt.sources for s in SEED.findall(src)):
                get(seed).failed.append((fix, attempt.text))
    return [lessons[k] for k in sorted(lessons)]


def page_urls(kb: KnowledgeBase) -> dict[str, str]:
    """id -> page path relative to the site root, for every id a page or anchor exists for."""
    urls = {fid: f"findings/{fid}.html" for fid in kb.findings}  # a fact of the same name wins the id
    urls.update({name: f"facts.html#{name}" for name in kb.facts})
    urls.update({aid: f"articles/{aid}.html" for aid in kb.articles})
    urls.update({fid: f"fixes/{fid}.html" for fid in kb.fixes})
    urls.update({cid: f"causes/{cid}.html" for cid in kb.causes})
    urls.update({sid: f"symptoms/{sid}.html" for sid in kb.symptoms})
    return urls


def template_facts(steps: list[str]) -> list[str]:
    """Facts named by the ``{{ ... }}`` slots of some fix steps, in order of appearance."""
    names: dict[str, None] = {}
    for step in steps:
        try:
            for _, source, _ in split_template(step):
                if source:
                    names.update(dict.fromkeys(sorted(Expr(source).facts)))
        except ExprError:
            continue
    return list(names)


def site_config() -> dict:
    """site.yaml: how often people hit each symptom, and example values for the calculator inputs."""
    return yaml.safe_load(CONFIG.read_text(encoding="utf-8"))


def by_frequency(kb: KnowledgeBase, order: list[str]) -> list:
    """Symptoms, the ones people hit most often first (site.yaml); those it does not list after them, by id."""
    rank = {sid: i for i, sid in enumerate(order)}
    return sorted(kb.symptoms.values(), key=lambda s: (rank.get(s.id, len(rank)), s.id))


def example_value(name: str, spec: dict, examples: dict[str, str]) -> str:
    """The placeholder of a calculator input: the fact's own example, else its unit."""
    if name in examples:
        return f"e.g. {examples[name]}"
    return f"a number ({spec['unit']})" if spec["type"] == "number" and spec["unit"] else spec["type"]


# --------------------------------------------------------------------------- the site
class Site:
    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.config = site_config()
        self.urls = page_urls(kb)
        self.md = Markdown(self.urls.get)
        self.cited = citations(kb)
        self.env = Environment(loader=FileSystemLoader(str(HERE / "templates")), autoescape=True,
                               undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.pages = 0

    def render(self, out: Path, rel: str, template: str, **ctx: Any) -> None:
        base = "../" * rel.count("/")
        md = self.md
        helpers = {
            "base": base, "kb": self.kb, "version": __version__, "page_path": rel,
            "url": lambda id_: base + self.urls[id_],
            "has_page": lambda id_: id_ in self.urls,
            "inline": lambda text: md.inline(text, base),
            "block": lambda text: md.block(text, base),
            "step": lambda text: md.step(text, base),
            "source_html": source_html,
            "source_url": lambda src: f"{base}sources.html#{source_anchor(src)}",
            "pct": lambda p: f"{100 * p:.0f}%" if p >= 0.01 else f"{100 * p:.1f}%",
            "ratio": lambda x: f"×{x:g}",
        }
        html = self.env.get_template(template).render(**helpers, **ctx)
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
        self.pages += 1

    def write(self, out: Path) -> int:
        kb = self.kb
        (out / "static").mkdir(parents=True, exist_ok=True)
        for item in sorted((HERE / "static").iterdir()):
            if item.is_file():
                shutil.copyfile(item, out / "static" / item.name)
        (out / "data").mkdir(exist_ok=True)
        (out / "data" / "search-index.js").write_text(
            export.js_assign("LLMFIX_SEARCH", export.search_index(kb, self.urls)), encoding="utf-8")

        articles = [a for a in kb.articles.values() if a.id not in kb.symptoms]
        self.render(out, "index.html", "index.html", page_kind="home", lessons=seed_lessons(kb),
                    articles=articles, sources=self.cited,
                    symptoms=by_frequency(kb, self.config["symptom_order"]))
        for symptom in kb.symptoms.values():
            self._symptom(out, symptom)
        for cause in kb.causes.values():
            self.render(out, f"causes/{cause.id}.html", "cause.html", page_kind="cause", c=cause,
                        symptom=kb.symptoms[cause.symptom], rows=self._evidence_rows(cause),
                        fixes=[kb.fixes[f] for f in cause.fixes if f in kb.fixes],
                        calc=self._calc_facts([kb.fixes[f] for f in cause.fixes if f in kb.fixes]))
        for fix in kb.fixes.values():
            users = [c for c in kb.causes.values() if fix.id in c.fixes]
            self.render(out, f"fixes/{fix.id}.html", "fix.html", page_kind="fix", f=fix, users=users,
                        calc=self._calc_facts([fix]))
        for article in articles:
            body = self.md.article(article.body, "../")
            self.render(out, f"articles/{article.id}.html", "article.html", page_kind="article",
                        a=article, body=body, toc=[(s, slug(s)) for s in article.sections])
        self.render(out, "sources.html", "sources.html", page_kind="sources", sources=self.cited,
                    seed_names=seed_names(kb),
                    anchor=source_anchor, is_seed=lambda s: bool(SEED.search(s)))
        self.render(out, "facts.html", "facts.html", page_kind="facts", facts=self._fact_rows())
        self._findings(out)
        (out / MARKER).write_text(f"built by llmfix {__version__}; `llmfix site build` may replace this folder\n",
                                  encoding="utf-8")
        return self.pages

    # ------------------------------------------------------------------ pieces
    def _findings(self, out: Path) -> None:
        """One page per probe finding id, so a line of ``llmfix probe`` output can be looked up."""
        for finding in self.kb.findings.values():
            fact = self.kb.facts.get(finding.id)
            self.render(out, f"findings/{finding.id}.html", "finding.html", page_kind="finding", fd=finding,
                        fact=fact)

    def _symptom(self, out: Path, symptom: Any) -> None:
        kb = self.kb
        order = export.question_order(kb, symptom.id)
        rel = f"symptoms/{symptom.id}.html"
        data = export.symptom_data(kb, symptom, self.urls)
        script = f"data/symptom-{symptom.id}.js"
        (out / script).write_text(export.js_assign_item("LLMFIX_SYMPTOMS", symptom.id, data), encoding="utf-8")
        position = {f: i for i, f in enumerate(order)}
        checks = sorted(symptom.checks, key=lambda c: position.get(c.fact, len(position)))
        bearing = {c.fact: [(cause, ev) for cause in symptom.causes for ev in cause.evidence
                            if c.fact in ev.when.facts] for c in checks}
        fixes = {fid: kb.fixes[fid] for c in symptom.causes for fid in c.fixes if fid in kb.fixes}
        model = tree_model(kb, symptom, order, "../")
        article = kb.articles.get(symptom.id)
        self.render(out, rel, "symptom.html", page_kind="symptom", s=symptom, checks=checks,
                    bearing=bearing, script=script, fixes=list(fixes.values()),
                    calc=self._calc_facts(list(fixes.values()), skip={c.fact for c in symptom.checks}),
                    ranking=rank(State(kb, {symptom.id: 1.0})),
                    tree=decision_tree(model, "../", self.urls), model=model,
                    article=self.md.article(article.body, "../") if article else None,
                    toc=[(s, slug(s)) for s in article.sections] if article else [])

    def _evidence_rows(self, cause: Cause) -> list[dict]:
        rows = []
        for ev in cause.evidence:
            checks = [c for name in sorted(ev.when.facts) for c in self.kb.checks_for(name)]
            checks.sort(key=lambda c: c.symptom != cause.symptom)   # its own symptom's questions first
            rows.append({"ev": ev, "facts": sorted(ev.when.facts), "checks": checks})
        return rows

    def _calc_facts(self, fixes: list[Fix], skip: set[str] = frozenset()) -> list[dict]:
        names = template_facts([step for fix in fixes for step in fix.steps])
        rows = [{"name": n, **export.fact_spec(self.kb, n)} for n in names if n not in skip]
        for row in rows:
            row["label"] = (row["description"] or row["name"]).rstrip(".")
            row["placeholder"] = example_value(row["name"], row, self.config["examples"])
        return rows

    def _fact_rows(self) -> list[dict]:
        kb, rows = self.kb, []
        for name, spec in sorted(kb.facts.items()):
            readers = [c for c in kb.causes.values() if any(name in ev.when.facts for ev in c.evidence)]
            in_steps = [f for f in kb.fixes.values() if name in template_facts(f.steps)]
            rows.append({"spec": spec, "checks": kb.checks_for(name), "causes": readers, "fixes": in_steps})
        return rows


def _readable(folder: str | Path) -> Path:
    """``files.readable_folder`` with its one-line error as the site's own."""
    try:
        return readable_folder(folder)
    except ArtifactError as err:
        raise SiteError(str(err)) from None


def _prepare(out: Path) -> None:
    """Refuse to write into a folder that holds anything but an earlier build; clear that build."""
    if out.exists() and not out.is_dir():
        raise SiteError(f"{out}: exists and is not a folder")
    if out.is_dir() and any(_readable(out).iterdir()):
        if not (out / MARKER).is_file():
            raise SiteError(f"{out}: folder is not empty and holds no earlier llmfix site; "
                            "choose an empty or new folder")
        for name in GENERATED:
            target = out / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SiteError(f"{out}: cannot create the folder ({err.strerror})") from None


def build(kb: KnowledgeBase, out: str | Path) -> int:
    """Render the whole knowledge base into ``out``; returns the number of HTML pages written."""
    out = Path(out)
    _prepare(out)
    try:
        return Site(kb).write(out)
    except OSError as err:
        raise SiteError(f"{err.filename or out}: cannot write ({err.strerror})") from None


# --------------------------------------------------------------------------- serve
class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        sys.stderr.write(f"  {self.command} {self.path} {args[1] if len(args) > 1 else ''}\n")


def _exit_on_signal(signum: int, _frame) -> None:
    raise SystemExit(128 + signum)


def serve(kb: KnowledgeBase, port: int, directory: str | None = None) -> None:
    """Serve ``directory`` (or a fresh build in a temporary folder) on http://127.0.0.1:port only."""
    signal.signal(signal.SIGTERM, _exit_on_signal)  # so the temporary build below is removed
    signal.signal(signal.SIGHUP, _exit_on_signal)
    with tempfile.TemporaryDirectory(prefix="llmfix-site-") as tmp:
        if directory is None:
            root = Path(tmp) / "site"
            count = build(kb, root)
            click.echo(f"built {count} pages into a temporary folder", err=True)
        else:
            root = _readable(directory)
            if not (root / "index.html").is_file():
                raise SiteError(f"{root}: no index.html here; build one with: llmfix site build {root}")
        handler = functools.partial(_Quiet, directory=str(root))
        try:
            server = socketserver.ThreadingTCPServer(("127.0.0.1", port), handler, bind_and_activate=False)
            server.allow_reuse_address = True
            server.daemon_threads = True
            server.server_bind()
            server.server_activate()
        except OSError as err:
            raise SiteError(f"127.0.0.1:{port}: cannot listen ({err.strerror}); try --port") from None
        with server:
            click.echo(f"serving {root} at http://127.0.0.1:{server.server_address[1]}/  (Ctrl-C stops)", err=True)
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                click.echo("stopped", err=True)
