"""Bounded text reading and the Setting row shared by the setup readers."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NamedTuple

from ...errors import ArtifactError

MAX_BYTES = 4 << 20          # a launch script, training script or config is never larger
MAX_CONSOLE_BYTES = 8 << 20   # console output: the head and the tail beyond this are read (~1 s/MB to search)
STDIN = "-"


class Setting(NamedTuple):
    """``zero_optimization.stage = 3`` written at ``ds.json:4``."""

    path: str       # lower_snake key path, dotted for nested keys / keyword arguments of a call
    value: Any
    line: int = 0
    quote: str = ""  # the text as written, e.g. "--lr 3e-4"


def read_text(path: Path, limit: int = MAX_BYTES) -> str | None:
    """The first ``limit`` bytes as text, or None for binary content (NUL bytes)."""
    with open(path, "rb") as f:
        raw = f.read(limit)
    if b"\x00" in raw[:8192]:
        return None
    return raw.decode("utf-8-sig", "replace")  # a BOM is no part of the text (Python and YAML skip it too)


def read_console(path: str) -> tuple[str, bool]:
    """Console output (a file or ``-`` for stdin): its text and whether the middle was skipped.

    Beyond MAX_CONSOLE_BYTES the head and the last quarter are kept: errors sit at the end."""
    if path == STDIN:
        if sys.stdin is None:
            raise ArtifactError(STDIN, "standard input is closed: pipe the console output in (... | llmfix probe -)")
        head, tail, cut = _head_and_tail(sys.stdin.buffer)
        return (head + (b"\n" if cut else b"") + tail).decode("utf-8", "replace"), cut
    size = Path(path).stat().st_size
    with open(path, "rb") as f:
        if size <= MAX_CONSOLE_BYTES:
            return f.read().decode("utf-8", "replace"), False
        head = f.read(MAX_CONSOLE_BYTES * 3 // 4)
        f.seek(size - MAX_CONSOLE_BYTES // 4)
        tail = f.read()
    return (head + b"\n" + tail).decode("utf-8", "replace"), True


def shebang(head: str) -> str:
    """The interpreter line of a script ("#!/bin/bash"), or "": only that line names the
    language (a bash script calls python on the next one)."""
    first = head.partition("\n")[0]
    return first if first.startswith("#!") else ""


def snake(name: str) -> str:
    """A flag or key as a key path segment: --clip-grad -> clip_grad."""
    return name.strip().lstrip("-").replace("-", "_").lower()


def _head_and_tail(stream) -> tuple[bytes, bytes, bool]:
    """The first three quarters of MAX_CONSOLE_BYTES of a stream, its last quarter, and whether
    bytes between them were skipped; memory stays within MAX_CONSOLE_BYTES however long it runs."""
    head = stream.read(MAX_CONSOLE_BYTES * 3 // 4)
    keep, tail, cut = MAX_CONSOLE_BYTES // 4, b"", False
    for chunk in iter(lambda: stream.read(1 << 20), b""):
        tail += chunk
        if len(tail) > keep:
            tail, cut = tail[-keep:], True
    return head, tail, cut
