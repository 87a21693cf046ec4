"""Knowledge: rules/*.yaml and kb/*.md loaded into plain data, validated, and linted."""
from .loading import knowledge_root, load
from .model import KnowledgeBase

__all__ = ["KnowledgeBase", "knowledge_root", "load"]
