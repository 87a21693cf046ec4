"""Markdown (the kb/ articles, fix steps) as terminal text: a small renderer over markdown-it-py's
tokens. Headings bold, lists with their bullets or numbers and hanging indents, code blocks
indented as written, links as ``text (url)``. Raw HTML is never rendered (``html: False``): it
stays visible as the text it is.
"""
from __future__ import annotations

import click
from markdown_it import MarkdownIt
from markdown_it.token import Token

from .terminal import hang, words_styled

_MD = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def to_terminal(text: str, width: int) -> str:
    """The whole document, wrapped to ``width``, ending with one newline."""
    lines: list[str] = []
    lists: list[list] = []   # open lists: [next number or None for bullets]
    marker = ""              # the bullet/number waiting for the first paragraph of a list item
    heading = 0
    quote = ""
    for tok in _MD.parse(text):
        if tok.type == "heading_open":
            heading = int(tok.tag[1])
        elif tok.type == "heading_close":
            heading = 0
        elif tok.type in ("bullet_list_open", "ordered_list_open"):
            lists.append([int(tok.attrGet("start") or 1) if tok.type == "ordered_list_open" else None])
        elif tok.type in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
            if not lists:
                lines.append("")
        elif tok.type == "list_item_open":
            number = lists[-1][0]
            marker = "- " if number is None else f"{number}. "
            if number is not None:
                lists[-1][0] = number + 1
        elif tok.type == "blockquote_open":
            quote += "| "
        elif tok.type == "blockquote_close":
            quote = quote[:-2]
        elif tok.type in ("fence", "code_block"):
            pad = " " * (4 + 3 * len(lists))
            lines += [pad + line for line in tok.content.rstrip("\n").splitlines()] + [""]
        elif tok.type == "hr":
            lines += ["-" * min(width, 40), ""]
        elif tok.type == "inline":
            words = inline(tok)
            if heading:
                lines += [click.style(words, bold=True, underline=heading <= 2), ""]
                continue
            indent = quote + "   " * max(len(lists) - 1, 0) + ("   " if lists and not marker else "")
            head = indent + (marker.ljust(3) if marker else "")
            lines += hang(head, words, width, len(indent) + (3 if lists else 0))
            marker = ""
            if not lists:
                lines.append("")
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def inline(tok: Token) -> str:
    """One paragraph's text: code kept in backticks, emphasis bold, links as 'text (url)'."""
    out, links = [], []
    for child in tok.children or []:
        kind = child.type
        if kind in ("text", "html_inline"):
            out.append(child.content)
        elif kind == "code_inline":
            out.append(f"`{child.content}`")
        elif kind in ("softbreak", "hardbreak"):
            out.append(" ")
        elif kind in ("strong_open", "em_open"):
            out.append("\x00")
        elif kind in ("strong_close", "em_close"):
            out.append("\x01")
        elif kind == "link_open":
            links.append(child.attrGet("href") or "")
        elif kind == "link_close":
            href = links.pop()
            out.append(f" ({href})")
        elif kind == "image":
            out.append(f"[image: {child.content}]")
    text = "".join(out)
    return _bold_spans(text)


def _bold_spans(text: str) -> str:
    """Style the marked spans word by word, so that wrapping never splits an escape sequence."""
    pieces, bold = [], False
    for part in text.replace("\x01", "\x00").split("\x00"):
        pieces.append(words_styled(part, bold=True) if bold else part)
        bold = not bold
    return "".join(pieces)
