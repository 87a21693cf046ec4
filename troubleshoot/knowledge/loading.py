"""``load()``: the one entry point to the knowledge.

It serves the compiled snapshot (snapshot.py) when no knowledge file and no reading code changed
since a clean load, and otherwise reads and validates rules/ and kb/ (read.py, imported only then:
a warm `llmfix ask` never imports the YAML reader or the schema).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..errors import LlmfixError
from . import snapshot
from .layout import knowledge_files, knowledge_root
from .model import KnowledgeBase


@lru_cache(maxsize=4)
def load(root: str | None = None, strict: bool = True) -> KnowledgeBase:
    """Load the knowledge base; with ``strict`` a schema problem is an error (exit 2)."""
    path = Path(root) if root else knowledge_root()
    key = snapshot.key(path, [p for group in knowledge_files(path).values() for p in group])
    kb = snapshot.read(path, key)  # the stamps are taken first: an edit while reading shows next time
    if kb is not None:
        return kb  # written only after a load without problems, and nothing changed since
    from .read import load_with_problems

    kb, problems = load_with_problems(path)
    if not problems:
        snapshot.write(path, key, kb)
    elif strict:
        more = f" (and {len(problems) - 1} more; run `llmfix kb lint`)" if len(problems) > 1 else ""
        raise LlmfixError(f"{problems[0]}{more}")
    return kb
