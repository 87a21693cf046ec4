"""Bounded text reading and the Setting row shared by the setup readers."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NamedTuple

MAX_BYTES = 4 << 20          # a launch script, training script or config is never larger
MAX_CONSOLE_BYTES = 32 << 20  # console output: the head and the tail beyond this are read
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
    return raw.decode("utf-8", "replace")


def read_console(path: str) -> tuple[str, bool]:
    """Console output (a file or ``-`` for stdin): its text and whether the middle was skipped.

    Beyond MAX_CONSOLE_BYTES the head and the last quarter are kept: errors sit at the end."""
    if path == STDIN:
        raw = sys.stdin.buffer.read(MAX_CONSOLE_BYTES + 1)
        return raw[:MAX_CONSOLE_BYTES].decode("utf-8", "replace"), len(raw) > MAX_CONSOLE_BYTES
    size = Path(path).stat().st_size
    with open(path, "rb") as f:
        if size <= MAX_CONSOLE_BYTES:
            return f.read().decode("utf-8", "replace"), False
        head = f.read(MAX_CONSOLE_BYTES * 3 // 4)
        f.seek(size - MAX_CONSOLE_BYTES // 4)
        tail = f.read()
    return (head + b"\n" + tail).decode("utf-8", "replace"), True


def snake(name: str) -> str:
    """A flag or key as a key path segment: --clip-grad -> clip_grad."""
    return name.strip().lstrip("-").replace("-", "_").lower()
