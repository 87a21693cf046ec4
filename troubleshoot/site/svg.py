"""A symptom's decision tree, drawn at build time: the questions on the left, the causes on the right.

Questions carry the text a user is asked (facts only a probe measures carry their description,
dashed), numbered in the order the engine asks them; causes carry their full titles, wrapped. One
line per evidence item joins a question to the cause it moves: red where the answer the condition
names raises the odds, green where it lowers them, pink for a confirming item, thicker for a
stronger item. Both columns are ordered by the barycentre heuristic for two-layer graphs (each node
sorted by the mean position of its neighbours, repeated while the crossings go down), so 13 causes
do not turn into spaghetti. Ratio labels stay hidden until a node is highlighted (hover, keyboard
focus or tap, done by ui.js): a cause then shows its lines and their ``×lr / ×else_lr`` next to each
question, a question next to each cause. The same content as an outline, for phones and screen
readers, is :func:`tree_model` rendered by the symptom template.
"""
from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field

from markupsafe import Markup, escape

from ..knowledge.model import Cause, Evidence, KnowledgeBase, Symptom

FONT = 12.5
LINE = 15            # px per text line
GAP = 10             # px between nodes of one column
X_Q, W_Q = 4, 400
X_C, W_C = 660, 320
WIDTH = X_C + W_C + 4
LABEL_W = 112
PAD = 8


def text_width(text: str, size: float = FONT, narrow: float = 0.56) -> float:
    """Rough rendered width at ``size`` px: wide (CJK) characters count double."""
    return sum(size * (1.0 if unicodedata.east_asian_width(c) in "WF" else narrow) for c in text)


def wrap(text: str, width: float) -> list[str]:
    """The text in lines of at most ``width`` px; a word longer than a line is split."""
    out, line = [], ""
    for word in text.split():
        while text_width(word) > width:            # a long identifier: break it, it cannot wrap
            cut = max(1, int(len(word) * width / text_width(word)) - 1)
            if line:
                out.append(line)
                line = ""
            out.append(word[:cut])
            word = word[cut:]
        if line and text_width(f"{line} {word}") > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return out + [line] if line or not out else out


def plain(text: str) -> str:
    """Knowledge text without its `code` marks, for an SVG label."""
    return re.sub(r"`([^`]*)`", r"\1", text or "").strip()


def ratio(x: float) -> str:
    return f"×{x:.3g}"


@dataclass
class Question:
    fact: str
    text: str                 # the question (markdown inline), or the fact's description for probe-only facts
    href: str                 # relative to the symptom page
    number: int | None = None  # ask order; None: only a probe measures it
    links: list[Link] = field(default_factory=list)


@dataclass
class Link:
    question: Question
    cause: Cause
    ev: Evidence

    @property
    def label(self) -> str:
        text = ratio(self.ev.lr) + (f" / {ratio(self.ev.else_lr)}" if self.ev.else_lr != 1 else "")
        return text + (" ✓" if self.ev.confirms else "")

    @property
    def kind(self) -> str:
        return "ok" if self.ev.confirms else "up" if self.ev.lr > 1 else "down"


@dataclass
class TreeModel:
    symptom: Symptom
    questions: list[Question]   # top to bottom
    causes: list[Cause]         # top to bottom
    links: list[Link]

    def links_of(self, cause: Cause) -> list[Link]:
        return [link for link in self.links if link.cause is cause]


def tree_model(kb: KnowledgeBase, symptom: Symptom, order: list[str], base: str) -> TreeModel:
    """Questions, causes and the evidence joining them, in the drawing order (fewest crossings)."""
    checks = {c.fact: c for c in symptom.checks}
    read = sorted({f for c in symptom.causes for ev in c.evidence for f in ev.when.facts} - set(checks))
    asked = [f for f in order if f in checks] + [f for f in checks if f not in order]
    questions = [Question(f, checks[f].ask, f"#check-{f}", n) for n, f in enumerate(asked, 1)]
    for fact in read:
        spec = kb.facts.get(fact)
        questions.append(Question(fact, spec.description if spec and spec.description else fact,
                                  f"{base}facts.html#{fact}"))
    links = []
    for q in questions:
        q.links = [Link(q, c, ev) for c in symptom.causes for ev in c.evidence if q.fact in ev.when.facts]
        links += q.links
    questions, causes = _order(questions, list(symptom.causes), links)
    return TreeModel(symptom, questions, causes, links)


def crossings(links: list[Link], qpos: dict[str, int], cpos: dict[str, int]) -> int:
    ends = sorted((qpos[k.question.fact], cpos[k.cause.id]) for k in links)
    return sum(1 for i, (q1, c1) in enumerate(ends) for q2, c2 in ends[i + 1:] if q2 > q1 and c2 < c1)


def _order(questions: list[Question], causes: list[Cause], links: list[Link]) -> tuple[list, list]:
    """Alternate barycentre sweeps (Sugiyama's two-layer step) and keep the order with fewest crossings."""
    def positions(qs: list[Question], cs: list[Cause]) -> tuple[dict, dict]:
        return {q.fact: i for i, q in enumerate(qs)}, {c.id: i for i, c in enumerate(cs)}

    def mean(values: list[int], fallback: float) -> float:
        return sum(values) / len(values) if values else fallback

    qpos, cpos = positions(questions, causes)
    best = (crossings(links, qpos, cpos), questions, causes)
    for _ in range(6):
        causes = sorted(causes, key=lambda c: (mean([qpos[k.question.fact] for k in links if k.cause is c],
                                                     cpos[c.id]), -c.prior))
        qpos, cpos = positions(questions, causes)
        questions = sorted(questions, key=lambda q: mean([cpos[k.cause.id] for k in q.links], qpos[q.fact]))
        qpos, cpos = positions(questions, causes)
        count = crossings(links, qpos, cpos)
        if count >= best[0]:
            break
        best = (count, questions, causes)
    return best[1], best[2]


@dataclass
class _Box:
    lines: list[str]
    y: float = 0.0

    @property
    def h(self) -> float:
        return LINE * len(self.lines) + 10


def _stack(boxes: list[_Box], height: float) -> None:
    """Place boxes top to bottom, spreading the spare height evenly between them."""
    extra = (height - sum(b.h for b in boxes) - GAP * (len(boxes) - 1)) / (len(boxes) + 1)
    y = PAD + extra
    for b in boxes:
        b.y = y
        y += b.h + GAP + extra


def decision_tree(model: TreeModel, base: str, urls: dict[str, str]) -> Markup:
    """The SVG markup of ``model``; ``base`` leads from the symptom page to the site root."""
    qbox = {q.fact: _Box(wrap((f"{q.number}. " if q.number else "") + plain(q.text), W_Q - 16))
            for q in model.questions}
    cbox = {c.id: _Box(wrap(c.title, W_C - 16)) for c in model.causes}
    column = lambda boxes: sum(b.h for b in boxes) + GAP * (len(boxes) - 1)  # noqa: E731
    inner = max(column(list(qbox.values())), column(list(cbox.values())), 40)
    _stack([qbox[q.fact] for q in model.questions], inner)
    _stack([cbox[c.id] for c in model.causes], inner)
    height = inner + 2 * PAD
    sid = escape(model.symptom.id)
    out = [f'<svg class="tree" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" '
           f'width="{WIDTH}" height="{height:.0f}" role="img" aria-labelledby="tree-title-{sid}">',
           (f'<title id="tree-title-{sid}">Decision tree of {escape(model.symptom.title)}: '
            f'{len(model.questions)} questions, {len(model.causes)} causes</title>')]
    ends = _endpoints(model, qbox, cbox)
    for i, link in enumerate(model.links):      # lines first, so nodes are drawn over them
        (x1, y1), (x2, y2) = ends[i]
        width = 1 + 0.4 * min(abs(_span(link.ev)), 5)
        out.append(f'<path class="e e-{link.kind}" data-q="{escape(link.question.fact)}" '
                   f'data-c="{escape(link.cause.id)}" stroke-width="{width:.1f}" d="{_curve(x1, y1, x2, y2)}"/>')
    for q in model.questions:
        box, cls = qbox[q.fact], "n-q" if q.number else "n-q n-probe"
        tip = plain(q.text) if q.number else f"{plain(q.text)} (measured by a probe: {q.fact})"
        out.append(f'<a href="{escape(q.href)}" class="{cls}" data-q="{escape(q.fact)}"><title>{escape(tip)}</title>'
                   f'<rect x="{X_Q}" y="{box.y:.1f}" width="{W_Q}" height="{box.h:.0f}" rx="5"/>'
                   + _lines(box, X_Q + 8) + "</a>")
    for c in model.causes:
        box = cbox[c.id]
        out.append(f'<a href="{escape(base + urls[c.id])}" class="n-c" data-c="{escape(c.id)}">'
                   f'<title>{escape(c.title)} (prior {c.prior:g})</title>'
                   f'<rect x="{X_C}" y="{box.y:.1f}" width="{W_C}" height="{box.h:.0f}" rx="5"/>'
                   + _lines(box, X_C + 8) + "</a>")
    for i, link in enumerate(model.links):      # labels last: on top, hidden until highlighted
        (x1, y1), (x2, y2) = ends[i]
        out.append(_label(link, x1 + 6, y1, "at-q"))
        out.append(_label(link, x2 - LABEL_W - 6, y2, "at-c"))
    out.append("</svg>")
    return Markup("\n".join(out))


def _span(ev: Evidence) -> float:
    return math.log(ev.lr) - math.log(ev.else_lr)


def _endpoints(model: TreeModel, qbox: dict, cbox: dict) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """Where each line leaves its question and enters its cause: spread over the node's height,
    in the order of the other end, so lines into one node do not cross each other there."""
    ymid = {("q", f): b.y + b.h / 2 for f, b in qbox.items()} | {("c", c): b.y + b.h / 2 for c, b in cbox.items()}

    def spread(box: _Box, others: list[tuple[int, float]]) -> dict[int, float]:
        ordered = sorted(others, key=lambda t: t[1])
        room = max(box.h - 10, 0)
        n = len(ordered)
        return {i: box.y + 5 + room * (j + 0.5) / n for j, (i, _) in enumerate(ordered)} if n else {}

    qy, cy = {}, {}
    for f, box in qbox.items():
        mine = [(i, ymid[("c", k.cause.id)]) for i, k in enumerate(model.links) if k.question.fact == f]
        qy.update(spread(box, mine))
    for c, box in cbox.items():
        mine = [(i, ymid[("q", k.question.fact)]) for i, k in enumerate(model.links) if k.cause.id == c]
        cy.update(spread(box, mine))
    return [((X_Q + W_Q, qy[i]), (X_C, cy[i])) for i in range(len(model.links))]


def _lines(box: _Box, x: float) -> str:
    return "".join(f'<text x="{x}" y="{box.y + 5 + LINE * (i + 0.75):.1f}">{escape(line)}</text>'
                   for i, line in enumerate(box.lines))


def _label(link: Link, x: float, y: float, where: str) -> str:
    ev = link.ev
    tip = (f"{link.cause.title}: if {ev.when.source} holds ×{ev.lr:g}"
           + (f", otherwise ×{ev.else_lr:g}" if ev.else_lr != 1 else "")
           + (" (confirms)" if ev.confirms else "") + (f". {ev.says}" if ev.says else ""))
    parts = [(ratio(ev.lr), _dir(ev.lr))]
    if ev.else_lr != 1:
        parts += [(" / ", ""), (ratio(ev.else_lr), _dir(ev.else_lr))]
    if ev.confirms:
        parts.append((" ✓", "t-ok"))
    spans = "".join(f'<tspan class="{cls}">{escape(t)}</tspan>' if cls else escape(t) for t, cls in parts)
    return (f'<g class="lab {where}" data-q="{escape(link.question.fact)}" data-c="{escape(link.cause.id)}">'
            f'<title>{escape(tip)}</title>'
            f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="{LABEL_W}" height="20" rx="10"/>'
            f'<text x="{x + LABEL_W / 2:.1f}" y="{y + 4:.1f}" text-anchor="middle">{spans}</text></g>')


def _dir(x: float) -> str:
    return "t-up" if x > 1 else "t-down" if x < 1 else ""


def _curve(x1: float, y1: float, x2: float, y2: float) -> str:
    mid = (x1 + x2) / 2
    return f"M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
