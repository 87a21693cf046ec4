"""`llmfix kb new SYMPTOM_ID`: the two files of a new symptom, every required field in place.

The files load (so `llmfix ask` keeps working while you write) and `llmfix kb lint` lists what is
still missing (the sources); the TODOs mark the rest. docs/extending.md says what goes where.
"""
from __future__ import annotations

from pathlib import Path

from .. import contracts
from ..errors import LlmfixError
from ..files import readable_folder
from .schema import SYMPTOM_ID

RULE = """\
id: {sid}
title: TODO one line, as a user would say it
summary: >-
  TODO what the user sees, in two or three sentences.
aliases:
  en: [TODO how people write it]
  zh: []
  errors: []
facts:
  {prefix}.todo: {{type: bool, description: TODO what this fact says (or use a registered fact instead).}}
checks:
  - fact: {prefix}.todo
    ask: TODO the question whose answer tells the causes apart?
    cost: 1
causes:
  - id: {sid}.todo-cause
    title: TODO the cause in a few words
    prior: 0.1
    evidence:
      - when: {prefix}.todo == true
        lr: 10
        else_lr: 0.3
        says: TODO what the evidence shows.
    fixes: [fix-{sid}-todo]
    sources: []
fixes:
  - id: fix-{sid}-todo
    title: TODO the fix in a few words
    steps: ["TODO the first step, naming the framework a flag belongs to"]
    sources: []
"""


def new_symptom(root: Path, sid: str) -> list[Path]:
    """Write rules/<sid>.yaml and kb/<sid>.md under ``root``; never overwrite a file."""
    if not SYMPTOM_ID.match(sid):
        raise LlmfixError(f"{sid}: a symptom id is kebab-case, e.g. loss-spike")
    if not (readable_folder(root) / "rules").is_dir():
        raise LlmfixError(f"{root}: no rules/ folder here (run it in the repository root or pass --root)")
    rule, article = root / "rules" / f"{sid}.yaml", root / "kb" / f"{sid}.md"
    for path in (rule, article):
        if path.exists():
            raise LlmfixError(f"{path}: already exists")
    sections = "".join(f"## {s}\nTODO\n\n" for s in contracts.ARTICLE_SECTIONS)
    try:
        article.parent.mkdir(exist_ok=True)
        rule.write_text(RULE.format(sid=sid, prefix=sid.replace("-", "")), encoding="utf-8")
        article.write_text(f"---\nid: {sid}\ntitle: TODO\n---\n{sections}", encoding="utf-8")
    except OSError as err:
        raise LlmfixError(f"{err.filename or root}: cannot write ({err.strerror or err})") from None
    return [rule, article]
