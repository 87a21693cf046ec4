"""Knowledge text as safe HTML: markdown with raw HTML disabled, links that stay inside the site.

Everything the knowledge says reaches the page through here or through jinja's autoescape:

* markdown-it-py in CommonMark mode with ``html: False`` (a ``<script>`` in an article is text),
  tables enabled, and markdown-it's own link validation (no ``javascript:`` or ``data:`` links);
* links: ``http(s)://`` and ``mailto:`` stay as plain ``<a rel="noopener">``; ``#anchors`` stay;
  a relative link to a known id (``nan-loss.md``, ``rules/nan-loss.yaml``, ``fix-...``) is pointed
  at that page; any other relative link is dropped (its text stays), so no page links to nothing;
* images never load: an image becomes a link to it (external) or its alt text, because the site
  must not pull anything from outside;
* inline code that is exactly an id (```nan-loss.invalid-mask```) links to its page;
* fix steps keep their ``{{ expr :fmt }}`` slots as ``<span class="calc">`` that the browser fills.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup, escape

from ..knowledge.expr import Expr, ExprError, split_template, with_placeholders
from .export import expr_tree

_SLUG_DROP = re.compile(r"[^\w\u3400-\u9fff -]", re.U)
_URL = re.compile(r"https?://[^\s<>\"'()\[\]]+[^\s<>\"'()\[\].,;:!?]")
_ARXIV = re.compile(r"\barXiv:\s?(\d{4}\.\d{4,5})(v\d+)?", re.I)
_SLOT = re.compile("\ue000(\\d+)\ue001")


def slug(text: str) -> str:
    """A heading anchor: 'Fixes, safest first' -> 'fixes-safest-first'."""
    text = _SLUG_DROP.sub("", text.strip().lower())
    return re.sub(r"[\s-]+", "-", text).strip("-") or "section"


def source_anchor(source: str) -> str:
    """A stable anchor on sources.html for one source string."""
    return "src-" + hashlib.sha1(source.encode("utf-8")).hexdigest()[:10]


class Markdown:
    """One renderer per site; ``resolve(name) -> site path | None`` maps ids to pages."""

    def __init__(self, resolve: Callable[[str], str | None]) -> None:
        self.resolve = resolve
        # articles: full CommonMark (+ tables); the short fields of rules (titles, steps, questions)
        # keep `code` and links but not emphasis, because they are full of math: sqrt(2/(5*h*l))
        self.md = self._renderer(MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]))
        self.fields = self._renderer(MarkdownIt("commonmark", {"html": False}).disable("emphasis"))

    def _renderer(self, md: MarkdownIt) -> MarkdownIt:
        # add_render_rule binds each function to the renderer (``function.__get__(renderer)``,
        # which re-binds a bound method too), so register plain functions that call back here
        for name, method in (("link_open", self._link_open), ("link_close", self._link_close),
                             ("image", self._image), ("code_inline", self._code_inline),
                             ("heading_open", self._heading_open)):
            md.add_render_rule(name, lambda renderer, *args, _m=method: _m(renderer, *args))
        return md

    # ------------------------------------------------------------------ public
    def article(self, text: str, base: str) -> Markup:
        """A kb/ article as HTML; ``base`` leads back to the site root."""
        return Markup(self.md.render(str(text or ""), self._env(base)))

    def block(self, text: str, base: str) -> Markup:
        """A multi-line field of a rule (how, summary, not_this_when) as HTML paragraphs."""
        return Markup(self.fields.render(str(text or ""), self._env(base)))

    def inline(self, text: str, base: str) -> Markup:
        """One line of a rule (titles, says, steps) without the wrapping <p>."""
        return Markup(self.fields.renderInline(str(text or ""), self._env(base)))

    def step(self, text: str, base: str) -> Markup:
        """A fix step: inline markdown with each ``{{ expr :fmt }}`` as a computable span."""
        pieces, slots = [], []
        try:
            parts = split_template(str(text))
        except ExprError:
            return self.inline(text, base)
        for literal, source, fmt in parts:
            pieces.append(literal.replace("\ue000", "").replace("\ue001", ""))
            if source:
                pieces.append(f"\ue000{len(slots)}\ue001")
                slots.append((source, fmt))
        html = str(self.inline("".join(pieces), base))

        def fill(m: re.Match) -> str:
            before = html[:m.start()]
            in_code = before.count("<code") > before.count("</code>")
            return str(calc_span(*slots[int(m.group(1))], in_code=in_code))

        return Markup(_SLOT.sub(fill, html))

    # ------------------------------------------------------------------ rules
    @staticmethod
    def _env(base: str) -> dict:
        return {"base": base, "links": [], "slugs": set()}

    def _target(self, href: str, base: str) -> tuple[str | None, bool]:
        """(href to write or None to drop the link, whether it leaves the site)."""
        if re.match(r"(?i)^(https?:|mailto:)", href):
            return href, True
        if href.startswith("#"):
            return href, False
        path, _, frag = href.partition("#")
        name = PurePosixPath(path).name
        stem = re.sub(r"\.(md|ya?ml|html)$", "", name)
        page = self.resolve(stem) if stem else None
        if page is None:
            return None, False
        return base + page + (f"#{frag}" if frag else ""), False

    def _link_open(self, renderer: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
        token = tokens[idx]
        href, external = self._target(token.attrGet("href") or "", env.get("base", ""))
        env.setdefault("links", []).append(href is not None)
        if href is None:
            return ""
        attrs = f' href="{escape(href)}"'
        if external:
            attrs += ' rel="noopener" class="ext"'
        title = token.attrGet("title")
        if title:
            attrs += f' title="{escape(title)}"'
        return f"<a{attrs}>"

    @staticmethod
    def _link_close(renderer: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
        stack = env.setdefault("links", [])
        return "</a>" if (stack.pop() if stack else False) else ""

    @staticmethod
    def _image(renderer: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
        token = tokens[idx]
        src = token.attrGet("src") or ""
        alt = renderer.renderInlineAsText(token.children or [], options, env) or src
        if re.match(r"(?i)^https?:", src) and not any(env.get("links", [])):
            return f'<a href="{escape(src)}" rel="noopener" class="ext">{escape(alt)}</a>'
        return f"<span class=\"img-alt\">{escape(alt)}</span>"

    def _code_inline(self, renderer: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
        content = tokens[idx].content
        code = f"<code>{escape(content)}</code>"
        page = self.resolve(content.strip()) if not any(env.get("links", [])) else None
        if page:
            return f'<a href="{escape(env.get("base", "") + page)}">{code}</a>'
        return code

    @staticmethod
    def _heading_open(renderer: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
        token = tokens[idx]
        inline = tokens[idx + 1] if idx + 1 < len(tokens) else None
        text = inline.content if inline is not None else ""
        anchor, n = slug(text), 2
        seen = env.setdefault("slugs", set())
        while anchor in seen:
            anchor = f"{slug(text)}-{n}"
            n += 1
        seen.add(anchor)
        return f'<{token.tag} id="{escape(anchor)}">'


def calc_span(source: str, fmt: str, in_code: bool = False) -> Markup:
    """``<span class="calc">`` holding the parsed expression; until computed it shows the
    expression with placeholders for the facts it needs (``sqrt(2/(5*<HIDDEN_SIZE>))``)."""
    try:
        tree = json.dumps(expr_tree(source), separators=(",", ":"), allow_nan=False)
    except (ExprError, ValueError):
        return Markup("{{{{ {} }}}}").format(source)
    inner = Markup("{}" if in_code else "<code>{}</code>").format(with_placeholders(source, Expr(source).facts, {}))
    return Markup('<span class="calc" data-expr="{}" data-fmt="{}" data-src="{}">{}</span>').format(
        tree, fmt, source, inner)


def source_html(source: str) -> Markup:
    """A source string with its URLs and arXiv ids as plain outside links, everything else escaped."""
    out, pos = [], 0
    hits = sorted([(m.start(), m.end(), m.group(0)) for m in _URL.finditer(source)]
                  + [(m.start(), m.end(), f"https://arxiv.org/abs/{m.group(1)}{m.group(2) or ''}")
                     for m in _ARXIV.finditer(source)])
    for start, end, url in hits:
        if start < pos:
            continue
        out.append(escape(source[pos:start]))
        out.append(Markup('<a href="{}" rel="noopener" class="ext">{}</a>').format(url, source[start:end]))
        pos = end
    out.append(escape(source[pos:]))
    return Markup("").join(out)
