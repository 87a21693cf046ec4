"""Render a Diagnosis for the terminal: findings one per line, then ranked causes with why and fixes.

Sample (``llmfix ask --no-input "loss went nan" --answer data.mask.binary=no``)::

    Symptom: nan-loss  Loss becomes NaN or Inf  (match 0.83; evidence 0.81)
    Symptom: mask-error  Attention mask or label mask is wrong  (evidence 0.85)

    1. nan-loss.invalid-mask  Attention mask is not binary (or is inverted)  [confirmed 0.81]
       why: prior 0.08 × 50 (data.mask.binary = False) → 0.81
            A mask value other than 0/1 reaches the model. (data.mask.binary from user)
       fix: Pass a 0/1 attention mask with 1 = keep
         - Convert before calling the model: `attention_mask = (attention_mask > 0).long()`; ...
    ...
    5. nan-loss.lr-too-high  Learning rate too high for this model and batch  [untested 0.18]
       why: prior 0.18 → 0.18  (untested: no evidence yet)
       fix: Lower the learning rate step by step (and warm up)
         - Divide the learning rate by 5 ...: `<LR>/5`; ...
         (to fill in <LR>: --answer train.lr=VALUE)
    More: llmfix kb show nan-loss.invalid-mask

A cause still at its prior says ``untested``; only causes that evidence took below 0.05 are listed
under "Ruled out" (docs/knowledge-format.md).
"""
from __future__ import annotations

import click

from ..diagnosis import Diagnosis, RankedCause, SymptomMatch
from .timeline import timeline_lines

STATUS_COLOUR = {"confirmed": "red", "likely": "yellow", "possible": "white", "untested": "white",
                 "ruled-out": "bright_black"}
SEVERITY_COLOUR = {"error": "red", "warning": "yellow", "info": "bright_black"}


def render(diag: Diagnosis, top: int = 5, fixes_per_cause: int = 2) -> str:
    lines: list[str] = []
    if diag.artifacts:
        lines.append(click.style("Artifacts", bold=True))
        lines += [f"  {a.kind:<20} {a.path}" + (f"  ({a.detail})" if a.detail else "") for a in diag.artifacts]
        lines.append("")
    if diag.findings:
        lines.append(click.style("Findings", bold=True))
        width = min(max(len(f.where) for f in diag.findings), 40)
        for f in diag.findings:
            sev = click.style(f"{f.severity:<7}", fg=SEVERITY_COLOUR[f.severity])
            lines.append(f"  {sev} {f.where:<{width}}  {f.id}  {f.message}")
        lines.append("")
    lines += [f"  {row}" if row else row for row in timeline_lines(diag.attachments)]
    if diag.weak_match:
        lines.append("The match is weak: your words fit no symptom well. Closest candidates "
                     "(describe what you see in other words, e.g. the log line or error):")
    for s in diag.symptoms[:3]:
        lines.append(click.style(f"Symptom: {s.id}", bold=True) + f"  {s.title}  ({_basis(s)})")
    if diag.symptoms:
        lines.append("")
    shown = [c for c in diag.causes if c.status != "ruled-out"][:top]
    for i, cause in enumerate(shown, 1):
        lines += _cause(i, cause, fixes_per_cause)
    ruled_out = [c.id for c in diag.causes if c.status == "ruled-out"]
    if ruled_out:
        lines.append(click.style(f"Ruled out: {', '.join(ruled_out)}", fg="bright_black"))
        lines.append("")
    if diag.questions:
        lines.append(click.style("Questions that would sharpen this", bold=True)
                     + " (answer with --answer FACT=VALUE):")
        for q in diag.questions[:5]:
            hint = f"  [{'/'.join(q.choices)}]" if q.choices else f"  [{q.type}]"
            lines.append(f"  {q.fact}{hint}  {q.text}" + (f"  (or: {q.probe})" if q.probe else ""))
        lines.append("")
    if shown:
        lines.append(f"More: llmfix kb show {shown[0].id}")
    elif any(f.id == "input.nothing_usable" for f in diag.findings) and not diag.symptoms:
        lines.append(click.style("Nothing usable was read from some of these artifacts (see the findings): "
                                 "no conclusion either way.", fg="yellow"))
    elif diag.artifacts and not diag.symptoms and not diag.problem_found:
        lines.append(click.style("Nothing wrong found in these artifacts.", fg="green")
                     + ' If training still misbehaves, describe it: llmfix ask "..." --probe PATH')
    return "\n".join(lines).rstrip() + "\n"


def _basis(s: SymptomMatch) -> str:
    """Why the symptom is listed: 'match 0.83', 'seen in the artifacts', 'not observed ...'."""
    if s.observed is False:
        return f"match {s.match:.2f}; not observed: the artifacts contradict it, so its causes are left out"
    parts = [f"match {s.match:.2f}" if s.match is not None else "",
             "seen in the artifacts" if s.observed else "",
             f"evidence {s.implied:.2f}" if s.implied is not None and not s.observed else ""]
    return "; ".join(p for p in parts if p)


def _cause(rank: int, cause: RankedCause, fixes_per_cause: int) -> list[str]:
    label = click.style(f"[{cause.status} {cause.score:.2f}]", fg=STATUS_COLOUR[cause.status])
    why = cause.explain() + ("  (untested: no evidence yet)" if cause.status == "untested" else "")
    lines = [click.style(f"{rank}. {cause.id}", bold=True) + f"  {cause.title}  {label}",
             f"   why: {why}"]
    if cause.same_fault:
        lines.append(f"   the same fault as: {', '.join(cause.same_fault)}")
    said = set()
    for ev in cause.evidence:
        if ev.holds and ev.says and ev.condition not in said:
            said.add(ev.condition)
            lines.append(f"        {ev.says} ({ev.fact} from {ev.source})")
    for fix in cause.fixes[:fixes_per_cause]:
        lines.append(f"   fix: {fix.title}")
        lines += [f"     - {step}" for step in fix.steps]
        if fix.needs:
            fill = ", ".join(f"{fix.placeholders.get(f, f)}: --answer {f}=VALUE" for f in fix.needs)
            lines.append(f"     (to fill in {fill})")
        lines.append(click.style(f"     sources: {'; '.join(fix.sources)}", fg="bright_black"))
    if len(cause.fixes) > fixes_per_cause:
        lines.append(f"   (+{len(cause.fixes) - fixes_per_cause} more fixes: llmfix kb show {cause.id})")
    return lines + [""]
