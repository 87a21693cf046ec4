"""A symptom's decision tree as inline SVG, drawn at build time: symptom -> checks -> causes.

Columns, left to right: the symptom; the facts its evidence reads (checks first, in the order the
engine asks them, then facts only a probe measures, dashed); one label per evidence edge
(``×30 / ×0.05`` = the likelihood ratio when the condition holds / when it does not, ``✓`` when
it confirms); the causes. Each edge gets a row of its own, so no label ever overlaps another, and
the causes sit in the order that crosses the fewest edges. Every text is escaped; every node links
to its page, and hovering shows the full question, condition or title.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from markupsafe import Markup, escape

from ..knowledge.model import Cause, Evidence, KnowledgeBase, Symptom

ROW = 30             # px per row (one per edge)
NODE_H = 24
FONT = 12.5
X_SYM, W_SYM = 4, 132
X_FACT, W_FACT = 172, 252
X_LAB, W_LAB = 462, 108
X_CAUSE, W_CAUSE = 606, 300
WIDTH = X_CAUSE + W_CAUSE + 4
PAD = 8


def text_width(text: str, size: float = FONT, narrow: float = 0.56) -> float:
    """Rough rendered width at ``size`` px: wide (CJK) characters count double."""
    return sum(size * (1.0 if unicodedata.east_asian_width(c) in "WF" else narrow) for c in text)


def fit(text: str, width: float, size: float = FONT, narrow: float = 0.56) -> str:
    """The text, cut with an ellipsis so that it fits in ``width`` px."""
    if text_width(text, size, narrow) <= width:
        return text
    out = ""
    for ch in text:
        if text_width(out + ch + "…", size, narrow) > width:
            break
        out += ch
    return out.rstrip() + "…"


def wrap(text: str, width: float, lines: int) -> list[str]:
    words, out, line = text.split(), [], ""
    for word in words:
        if line and text_width(line + " " + word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    out.append(line)
    if len(out) > lines:
        out = out[:lines - 1] + [fit(" ".join(out[lines - 1:]), width)]
    return [fit(x, width) for x in out]


def ratio(x: float) -> str:
    return f"×{x:.3g}"


@dataclass
class Edge:
    fact: str
    cause: Cause
    ev: Evidence
    row: int = 0


def decision_tree(kb: KnowledgeBase, symptom: Symptom, order: list[str], base: str,
                  urls: dict[str, str]) -> Markup:
    """The SVG markup; ``order`` is the engine's question order, ``base`` leads to the site root."""
    checks = {c.fact: c for c in symptom.checks}
    read = sorted({f for c in symptom.causes for ev in c.evidence for f in ev.when.facts} - set(checks))
    facts = [f for f in order if f in checks] + [f for f in checks if f not in order] + read
    edges, rows_of, row = [], {}, 0
    for fact in facts:
        mine = [Edge(fact, c, ev) for c in symptom.causes for ev in c.evidence if fact in ev.when.facts]
        for i, edge in enumerate(mine):
            edge.row = row + i
        rows_of[fact] = (row, max(len(mine), 1))
        row += max(len(mine), 1)
        edges += mine
    # causes ordered by the mean row of their edges: fewest crossings, related causes side by side
    def center(cause: Cause) -> float:
        rows = [e.row for e in edges if e.cause is cause]
        return sum(rows) / len(rows) if rows else float("inf")

    causes = sorted(symptom.causes, key=lambda c: (center(c), -c.prior))
    n_rows = max(row, len(causes), 1)
    height = n_rows * ROW + 2 * PAD
    y_row = lambda r: PAD + r * ROW + ROW / 2  # noqa: E731
    cause_step = n_rows * ROW / max(len(causes), 1)
    y_cause = {c.id: PAD + (i + 0.5) * cause_step for i, c in enumerate(causes)}
    y_fact = {f: PAD + (rows_of[f][0] + rows_of[f][1] / 2) * ROW for f in facts}

    out = [f'<svg class="tree" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" '
           f'width="{WIDTH}" height="{height:.0f}" role="img" aria-labelledby="tree-title-{escape(symptom.id)}">',
           f'<title id="tree-title-{escape(symptom.id)}">Decision tree of {escape(symptom.title)}: '
           f'{len(facts)} checks, {len(causes)} causes</title>']
    # edges first, so nodes are drawn over them
    y_sym = PAD + n_rows * ROW / 2
    for fact in facts:
        out.append(_curve(X_SYM + W_SYM, y_sym, X_FACT, y_fact[fact], "e-sym"))
    for e in edges:
        cls = "e-ok" if e.ev.confirms else "e-ev"
        out.append(_curve(X_FACT + W_FACT, y_fact[e.fact], X_LAB, y_row(e.row), cls))
        out.append(_curve(X_LAB + W_LAB, y_row(e.row), X_CAUSE, y_cause[e.cause.id], cls))
    # symptom
    lines = wrap(symptom.title, W_SYM - 12, 4)
    h = max(NODE_H, 16 * len(lines) + 10)
    out.append(f'<g class="n-sym"><rect x="{X_SYM}" y="{y_sym - h / 2:.1f}" width="{W_SYM}" height="{h}" rx="6"/>')
    for i, line in enumerate(lines):
        y = y_sym - 8 * (len(lines) - 1) + 16 * i + 4
        out.append(f'<text x="{X_SYM + W_SYM / 2}" y="{y:.1f}" text-anchor="middle">{escape(line)}</text>')
    out.append("</g>")
    # facts
    for n, fact in enumerate(facts, 1):
        check = checks.get(fact)
        y = y_fact[fact]
        if check is not None:
            href, cls, label = f"#check-{fact}", "n-fact", f"{n}. {fact}"
            tip = f"{check.ask} ({fact})"
        else:
            href, cls, label = f"{base}facts.html#{fact}", "n-fact n-probe", fact
            spec = kb.facts.get(fact)
            tip = f"{fact}: measured by a probe. {spec.description if spec else ''}"
        out.append(f'<a href="{escape(href)}" class="{cls}"><title>{escape(tip)}</title>'
                   f'<rect x="{X_FACT}" y="{y - NODE_H / 2:.1f}" width="{W_FACT}" height="{NODE_H}" rx="4"/>'
                   f'<text x="{X_FACT + 8}" y="{y + 4:.1f}">{escape(fit(label, W_FACT - 14))}</text></a>')
    # edge labels
    for e in edges:
        y = y_row(e.row)
        text = ratio(e.ev.lr) + (f" / {ratio(e.ev.else_lr)}" if e.ev.else_lr != 1 else "")
        text += " ✓" if e.ev.confirms else ""
        tip = (f"{e.cause.title}: if {e.ev.when.source} holds ×{e.ev.lr:g}"
               + (f", otherwise ×{e.ev.else_lr:g}" if e.ev.else_lr != 1 else "")
               + (" (confirms)" if e.ev.confirms else "") + (f". {e.ev.says}" if e.ev.says else ""))
        parts = [(ratio(e.ev.lr), _dir(e.ev.lr))]
        if e.ev.else_lr != 1:
            parts += [(" / ", ""), (ratio(e.ev.else_lr), _dir(e.ev.else_lr))]
        if e.ev.confirms:
            parts.append((" ✓", "t-ok"))
        if text_width(text, 11, 0.6) > W_LAB - 8:   # too long to colour piece by piece: cut it
            parts = [(fit(text, W_LAB - 8, 11, 0.6), _dir(e.ev.lr))]
        spans = "".join(f'<tspan class="{cls}">{escape(t)}</tspan>' if cls else escape(t) for t, cls in parts)
        out.append(f'<g class="lab{" lab-ok" if e.ev.confirms else ""}"><title>{escape(tip)}</title>'
                   f'<rect x="{X_LAB}" y="{y - 10:.1f}" width="{W_LAB}" height="20" rx="10"/>'
                   f'<text x="{X_LAB + W_LAB / 2}" y="{y + 4:.1f}" text-anchor="middle">{spans}</text></g>')
    # causes
    for cause in causes:
        y = y_cause[cause.id]
        href = base + urls[cause.id]
        tip = f"{cause.title} (prior {cause.prior:g}) — {cause.id}"
        out.append(f'<a href="{escape(href)}" class="n-cause"><title>{escape(tip)}</title>'
                   f'<rect x="{X_CAUSE}" y="{y - NODE_H / 2:.1f}" width="{W_CAUSE}" height="{NODE_H}" rx="4"/>'
                   f'<text x="{X_CAUSE + 8}" y="{y + 4:.1f}">{escape(fit(cause.title, W_CAUSE - 16))}</text></a>')
    out.append("</svg>")
    return Markup("\n".join(out))


def _dir(x: float) -> str:
    return "t-up" if x > 1 else "t-down" if x < 1 else ""


def _curve(x1: float, y1: float, x2: float, y2: float, cls: str) -> str:
    mid = (x1 + x2) / 2
    return (f'<path class="{cls}" d="M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} '
            f'{x2:.1f},{y2:.1f}"/>')
