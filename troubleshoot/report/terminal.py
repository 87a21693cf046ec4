"""Render a Diagnosis for the terminal, answer first: the ranking (one line per cause), then what
to ask next while nothing is confirmed, then fix steps for the confirmed and likely causes (each
fix once), then the evidence from the artifacts. The JSON (Diagnosis.to_json) stays complete:
this is only a view of it.

Sample (``llmfix ask --no-input "loss went nan" --answer data.mask.binary=no``)::

    Symptom: nan-loss  Loss becomes NaN or Inf  (match 0.83; evidence 0.81)
    Symptom: mask-error  Attention mask or label mask is wrong  (evidence 0.85)

    Causes, most likely first
      1. [confirmed 0.81] Attention mask is not binary (or is inverted)  nan-loss.invalid-mask
           A mask value other than 0/1 reaches the model. (data.mask.binary = False, from user)
      2. [untested 0.18] Learning rate too high for this model and batch  nan-loss.lr-too-high
    ...
    What to do
      1. Attention mask is not binary (or is inverted)
         why: prior 0.08 × 50 (data.mask.binary = False) → 0.81
         the same fault as: mask-error.non-binary
         fix: Pass a 0/1 attention mask with 1 = keep
           - Check `torch.unique(batch['attention_mask'])`: it must be `tensor([0, 1])`, ...

Lines wrap to the terminal width (``width``) with hanging indents. Colours use the terminal's own
palette (red / yellow / cyan, bold and dim), never white text, so they read on light and dark
themes; click drops them when stdout is no terminal or NO_COLOR is set (cli.main).
"""
from __future__ import annotations

import math
import re
import shutil

import click

from ..diagnosis import WORDS, Diagnosis, EvidenceLine, Question, RankedCause, SymptomMatch
from ..observations import Finding
from .timeline import timeline_lines

STATUS_STYLE = {"confirmed": {"fg": "red", "bold": True}, "likely": {"fg": "yellow", "bold": True},
                "possible": {"fg": "cyan"}, "untested": {"dim": True}, "ruled-out": {"dim": True}}
SEVERITY_STYLE = {"error": {"fg": "red", "bold": True}, "warning": {"fg": "yellow"}, "info": {"dim": True}}
ACTIONABLE = ("confirmed", "likely")  # causes whose fix steps are printed without --fixes
DEFAULT_WIDTH = 100


def terminal_width() -> int:
    """COLUMNS, else the terminal's width, else 100 (a pipe or a file); never below 40."""
    return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def hang(head: str, text: str, width: int, indent: int | None = None) -> list[str]:
    """``head`` (may be styled) followed by ``text`` wrapped on spaces to ``width``; continuation
    lines are indented by ``indent`` (default: the visible width of ``head``). Styles in ``text``
    do not count towards the width; a word longer than a line stays whole."""
    lead = len(click.unstyle(head))
    indent = lead if indent is None else indent
    lines, line, used, empty = [], head, lead, True
    for word in text.split(" "):  # split on single spaces: a double space stays one
        size = len(click.unstyle(word))
        if empty and not word:
            continue
        if not empty and used + 1 + size > width:
            lines.append(line.rstrip())
            line, used, empty = " " * indent, indent, True
        line, used, empty = line + ("" if empty else " ") + word, used + size + (0 if empty else 1), False
    return lines + [line]


def words_styled(text: str, **style) -> str:
    """Style each word on its own, so that a wrapped line never carries a style across the break."""
    return " ".join(click.style(word, **style) if word else word for word in text.split(" "))


def render(diag: Diagnosis, top: int = 5, fixes_per_cause: int = 1, all_fixes: bool = False,
           width: int | None = None) -> str:
    width = width or terminal_width()
    shown = [c for c in diag.causes if c.status != "ruled-out"][:top]
    lines: list[str] = []
    lines += _symptoms(diag, width)
    lines += _ranking(diag, shown, width)
    confirmed = any(c.status == "confirmed" for c in shown)
    if diag.questions and not confirmed:
        lines += _questions(diag.questions[:5], width, "Nothing is confirmed yet. ")
    lines += _fixes(shown, fixes_per_cause, all_fixes, width, {s.id for s in diag.symptoms if s.weight > 0})
    if diag.questions and confirmed:
        lines += _questions(diag.questions[:3], width)
    lines += _evidence(diag, width)
    if shown:
        lines.append(f"More: llmfix kb show {shown[0].id}")
    elif any(f.id == "input.nothing_usable" for f in diag.findings) and not diag.symptoms:
        lines.append(click.style("Nothing usable was read from some of these artifacts (see the findings): "
                                 "no conclusion either way.", fg="yellow"))
    elif diag.artifacts and not diag.symptoms and not diag.problem_found:
        advice = 'If training still misbehaves, describe it: llmfix ask "..." --probe PATH'
        lines += hang("", f"{_all_clear(diag)} {advice}", width, 2)
    return printable("\n".join(lines).rstrip() + "\n")


# Findings that say an artifact was read only in part: what was not read was not checked.
READ_IN_PART = ("logs.truncated", "logs.unreadable", "checkpoint.unreadable")


def _all_clear(diag: Diagnosis) -> str:
    """"Nothing wrong found", unless part of an artifact was never read (then no all-clear) or
    settings known to lead to a fault were read (then nothing went wrong yet, but see them)."""
    if any(f.id in READ_IN_PART for f in diag.findings):
        return words_styled("Read only in part: some of these artifacts were cut short or unreadable (see the "
                            "findings), and what was not read was not checked; no problem in the rest.", fg="yellow")
    risks = sum(f.id == "setup.risk" for f in diag.findings)
    if risks:
        return words_styled(f"No fault seen in these artifacts, but {risks} known risk{'s' if risks > 1 else ''} "
                            "in their settings (setup.risk above).", fg="yellow")
    return words_styled("Nothing wrong found in these artifacts.", fg="green")


# Control characters other than newline, tab and our own colour codes (SGR: ESC [ ... m): a file
# named "\x1b[2J\x1b]0;x\x07.log" would otherwise clear the screen and set the terminal's title.
_UNSAFE = re.compile(r"\x1b(?!\[[0-9;]*m)|[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every control character the terminal would obey shown escaped instead."""
    return _UNSAFE.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


def status_label(cause: RankedCause) -> str:
    return click.style(f"[{cause.status} {cause.score:.2f}]", **STATUS_STYLE[cause.status])


def cause_line(rank: int, cause: RankedCause, width: int) -> list[str]:
    """'  1. [likely 0.64] Title  id' and, below it, the strongest evidence for it."""
    head = f"  {rank}. " + status_label(cause) + " "
    lines = hang(head, f"{cause.title}  {click.style(cause.id, dim=True)}", width, 5)
    strongest = strongest_evidence(cause)
    if strongest:
        lines += hang("       ", strongest, width)
    return lines


def strongest_evidence(cause: RankedCause) -> str:
    """The factor that moved the cause most, in words; the words it shares with the report only
    when no fact moved it; '' while nothing did."""
    moving = [e for e in cause.evidence if e.factor != 1 and e.fact != WORDS]
    if moving:
        return _evidence_words(max(moving, key=lambda e: (abs(math.log(e.factor)), e.holds)))
    shared = [e for e in cause.evidence if e.fact == WORDS and e.factor > 1]
    return f"Words in common with it: {', '.join(shared[0].value)} (×{shared[0].factor:.2g})" if shared else ""


def _evidence_words(e: EvidenceLine) -> str:
    fact = f"{e.fact} = {_value(e.value)}, from {e.source}"
    direction = "for" if e.factor > 1 else "against"
    return f"{e.says} ({fact})" if e.says else f"{direction} it: {fact} (×{e.factor:g})"


def _value(value: object) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _symptoms(diag: Diagnosis, width: int) -> list[str]:
    lines = []
    if diag.weak_match:
        lines += hang("", "The match is weak: your words fit no symptom well. Closest candidates "
                          "(describe what you see in other words, e.g. the log line or error):", width)
    for s in diag.symptoms[:3]:
        lines += hang(click.style(f"Symptom: {s.id}", bold=True) + "  ", f"{s.title}  ({_basis(s)})", width, 2)
    return lines + [""] if lines else []


def _basis(s: SymptomMatch) -> str:
    """Why the symptom is listed: 'match 0.83', 'observed in what you gave', 'not observed ...'."""
    if s.observed is False:
        return f"match {s.match:.2f}; not observed: the artifacts contradict it, so its causes are left out"
    parts = [f"match {s.match:.2f}" if s.match is not None else "",
             "observed in what you gave" if s.observed else "",
             f"evidence {s.implied:.2f}" if s.implied is not None and not s.observed else ""]
    return "; ".join(p for p in parts if p)


def _ranking(diag: Diagnosis, shown: list[RankedCause], width: int) -> list[str]:
    lines = []
    if shown:
        lines.append(click.style("Causes, most likely first", bold=True))
        for i, cause in enumerate(shown, 1):
            lines += cause_line(i, cause, width)
    ruled_out = [c.id for c in diag.causes if c.status == "ruled-out"]
    if ruled_out:
        lines += [click.style(line, dim=True) for line in hang("Ruled out: ", ", ".join(ruled_out), width, 2)]
    return lines + [""] if lines else []


def _questions(questions: list[Question], width: int, lead: str = "") -> list[str]:
    lines = [click.style(f"{lead}Questions that would sharpen this:", bold=True)]
    for q in questions:
        lines += hang("  ? ", q.text, width)
        answer = f"--answer {q.fact}={answer_hint(q)}"
        lines += hang("      ", answer + (f"   or measure it: {q.probe}" if q.probe else ""), width)
    return lines + [""]


def answer_hint(q: Question) -> str:
    return {"bool": "yes|no", "number": "NUMBER", "text": "TEXT"}.get(q.type, "|".join(q.choices))


def _fixes(shown: list[RankedCause], per_cause: int, all_fixes: bool, width: int, on_table: set[str]) -> list[str]:
    """Fix steps for the confirmed and likely causes (every shown cause with --fixes); a fix two
    causes share is printed under the first and referenced under the second. "The same fault as"
    names the twins under symptoms on the table (the JSON names every declared twin): a log that
    shows no NaN is not told the fault's NaN name."""
    chosen = [(i, c) for i, c in enumerate(shown, 1) if all_fixes or c.status in ACTIONABLE]
    per_cause = len(max((c.fixes for c in shown), key=len, default=[])) if all_fixes else per_cause
    if not chosen:
        return [click.style("Fix steps are printed once a cause is likely; all of them now: --fixes", dim=True), ""] \
            if shown else []
    lines, printed = [click.style("What to do", bold=True)], {}
    for rank, cause in chosen:
        lines += hang(f"  {rank}. ", cause.title, width)
        lines += hang("     why: ", cause.explain(), width)
        twins = [t for t in cause.same_fault if t.split(".")[0] in on_table]
        if twins:
            lines += hang("     the same fault as: ", ", ".join(twins), width)
        for fix in cause.fixes[:per_cause]:
            if fix.id in printed:
                lines += hang("     fix: ", f"{fix.title} (printed above, under {printed[fix.id]})", width)
                continue
            printed[fix.id] = rank
            lines += _fix(fix, width)
        if len(cause.fixes) > per_cause:
            lines.append(f"     (+{len(cause.fixes) - per_cause} more: --fixes, or llmfix kb show {cause.id})")
        lines.append("")
    return lines


def _fix(fix, width: int) -> list[str]:
    lines = hang("     fix: ", words_styled(fix.title, bold=True), width)
    for step in fix.steps:
        lines += hang("       - ", step, width)
    if fix.needs:
        fill = ", ".join(f"{fix.placeholders.get(f, f)}: --answer {f}=VALUE" for f in fix.needs)
        lines += hang("       ", f"(to fill in {fill})", width)
    lines += [click.style(line, dim=True) for line in hang("       sources: ", "; ".join(fix.sources), width)]
    return lines


def _evidence(diag: Diagnosis, width: int) -> list[str]:
    """What the artifacts showed: findings (info ones on one clipped line each), the timeline, the
    artifacts read."""
    lines = []
    if diag.findings:
        lines.append(click.style("Findings", bold=True))
        for f in sorted(diag.findings, key=lambda f: ("error", "warning", "info").index(f.severity)):
            lines += _finding(f, width)
        lines.append("")
    lines += [f"  {row}" if row else row for row in timeline_lines(diag.attachments)]
    if diag.artifacts:
        read = ", ".join(f"{a.path} ({a.detail or a.kind})" for a in diag.artifacts)
        lines += [click.style(line, dim=True) for line in hang("Read: ", read, width, 2)]
    return lines


def _finding(f: Finding, width: int) -> list[str]:
    head = "  " + click.style(f"{f.severity:<7}", **SEVERITY_STYLE[f.severity]) + " "
    text = f"{f.where}  {f.message}  {click.style(f.id, dim=True)}"
    if f.severity != "info":
        return hang(head, text, width, 10)
    room = width - 10
    plain = f"{f.where}  {f.message}"
    return [head + (plain if len(plain) <= room else plain[:room - 1] + "…")]
