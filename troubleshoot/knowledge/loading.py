"""Where the knowledge is, which files make it up, and ``load()``: the one entry point.

``load()`` serves the compiled snapshot (snapshot.py) when no knowledge file and no reading code
changed since a clean load, and otherwise reads and validates rules/ and kb/ (read.py, imported
only then: a warm `llmfix ask` never imports the YAML reader or the schema).

The knowledge ships inside the wheel as ``troubleshoot/rules`` and ``troubleshoot/kb``; in a source
checkout the top-level ``rules/`` and ``kb/`` are read directly.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from ..errors import LlmfixError
from . import snapshot
from .model import KnowledgeBase

FINDINGS_FILE = "_findings.yaml"  # the catalogue of finding ids, beside the symptom files


def knowledge_root() -> Path:
    """The folder holding rules/ and kb/: $LLMFIX_KNOWLEDGE (your own knowledge tree), the source
    checkout, or the installed package."""
    override = os.environ.get("LLMFIX_KNOWLEDGE")
    if override:
        if not (Path(override) / "rules").is_dir():
            raise LlmfixError(f"{override}: LLMFIX_KNOWLEDGE must name a folder holding rules/ and kb/")
        return Path(override)
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "rules").is_dir() and (checkout / "kb").is_dir():
        return checkout
    import importlib.util

    spec = importlib.util.find_spec("troubleshoot.rules")
    if spec and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).parent
    raise LlmfixError("knowledge not found: neither rules/ beside the package nor troubleshoot.rules installed")


def knowledge_files(root: Path) -> dict[str, list[Path]]:
    """The knowledge files by kind, in the order they are read (facts first: symptoms and
    signatures refer to them)."""
    rules = root / "rules"
    return {"facts": sorted((rules / "_facts").glob("*.yaml")),
            "symptoms": sorted(p for p in rules.glob("*.yaml") if not p.name.startswith("_")),
            "findings": [p for p in (rules / FINDINGS_FILE,) if p.is_file()],
            "signatures": sorted((rules / "_signatures").glob("*.yaml")),
            "articles": sorted((root / "kb").glob("*.md"))}


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
