"""Knowledge: rules/*.yaml and kb/*.md loaded into plain data, validated, and linted."""
from .model import KnowledgeBase
from .read import knowledge_root, load

__all__ = ["KnowledgeBase", "knowledge_root", "load"]
