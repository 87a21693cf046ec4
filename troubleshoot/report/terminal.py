"""Render a Diagnosis for the terminal: findings one per line, then ranked causes with why and fixes.

Sample (``llmfix ask --no-input "loss went nan" --answer data.mask.binary=no``)::

    Symptom: nan-loss  Loss becomes NaN or Inf  (match 0.91)

    1. nan-loss.invalid-mask  Attention mask is not binary  [confirmed 0.99]
       why: prior 0.10 × 30 (data.mask.binary = False) → 0.77
       fix: Build the attention mask as 0/1 with 1 = keep
         - Convert with `attention_mask = (attention_mask > 0).long()`.
         sources: 000_43af7a7a7fac43b8.txt
    ...
    More: llmfix kb show nan-loss.invalid-mask
"""
from __future__ import annotations

import click

from ..diagnosis import Diagnosis, RankedCause
from .timeline import timeline_lines

STATUS_COLOUR = {"confirmed": "red", "likely": "yellow", "possible": "white", "ruled-out": "bright_black"}
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
    for s in diag.symptoms[:3]:
        how = "match" if diag.query else "evidence"
        lines.append(click.style(f"Symptom: {s.id}", bold=True) + f"  {s.title}  ({how} {s.score:.2f})")
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
    elif diag.artifacts and not diag.symptoms and not diag.problem_found:
        lines.append(click.style("Nothing wrong found in these artifacts.", fg="green")
                     + ' If training still misbehaves, describe it: llmfix ask "..." --probe PATH')
    return "\n".join(lines).rstrip() + "\n"


def _cause(rank: int, cause: RankedCause, fixes_per_cause: int) -> list[str]:
    label = click.style(f"[{cause.status} {cause.score:.2f}]", fg=STATUS_COLOUR[cause.status])
    lines = [click.style(f"{rank}. {cause.id}", bold=True) + f"  {cause.title}  {label}",
             f"   why: {cause.explain()}"]
    said = set()
    for ev in cause.evidence:
        if ev.holds and ev.says and ev.condition not in said:
            said.add(ev.condition)
            lines.append(f"        {ev.says} ({ev.fact} from {ev.source})")
    for fix in cause.fixes[:fixes_per_cause]:
        lines.append(f"   fix: {fix.title}")
        lines += [f"     - {step}" for step in fix.steps]
        if fix.needs:
            lines.append(f"     (answer {', '.join(fix.needs)} to compute the numbers above)")
        lines.append(click.style(f"     sources: {'; '.join(fix.sources)}", fg="bright_black"))
    if len(cause.fixes) > fixes_per_cause:
        lines.append(f"   (+{len(cause.fixes) - fixes_per_cause} more fixes: llmfix kb show {cause.id})")
    return lines + [""]
