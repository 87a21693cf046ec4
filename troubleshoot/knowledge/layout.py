"""Where the knowledge is and which files make it up.

The knowledge ships inside the wheel as ``troubleshoot/rules`` and ``troubleshoot/kb``; in a source
checkout the top-level ``rules/`` and ``kb/`` are read directly.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import LlmfixError

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
