"""Evidence from what users write and paste: facts read from free text (with the quoted words)
and the error signatures in it. See docs/knowledge-format.md, "Facts from text".

A fact from text is the weakest source: answers and probes override it (merge order text <
probes < answers), and a rule's ``trust`` below 1 tempers its likelihood ratios.
"""
from __future__ import annotations

from ..knowledge.model import KnowledgeBase
from ..observations import Observations
from .extract import Extraction, Hit, extract

SOURCE = "text"

__all__ = ["Extraction", "Hit", "extract", "from_text"]


def from_text(kb: KnowledgeBase, text: str) -> Observations:
    """The facts and signature findings in the user's words (``llmfix ask TEXT``); the findings
    are informational: the user already knows about the error they pasted."""
    return extract(kb, text).observations(SOURCE, "text", severity="info")
