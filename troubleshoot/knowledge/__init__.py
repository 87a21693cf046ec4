"""Knowledge: rules/*.yaml and kb/*.md loaded into plain data, validated, and linted."""
from .layout import knowledge_root
from .loading import load
from .model import KnowledgeBase

__all__ = ["KnowledgeBase", "knowledge_root", "load"]
