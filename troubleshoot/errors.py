"""Errors that end a command with exit 2 and one line naming the file and the problem."""
from __future__ import annotations


class LlmfixError(Exception):
    """Bad usage or unreadable input. ``str(err)`` is the whole one-line message."""


class ArtifactError(LlmfixError):
    """An artifact could not be read: ``ArtifactError(path, "not a safetensors file (bad header)")``."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UnsafePickleError(ArtifactError):
    """A pickle that needs arbitrary code to load; it was refused and nothing in it ran."""
