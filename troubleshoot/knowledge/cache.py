"""The user's cache folder (``~/.cache/llmfix``): what llmfix derives from the knowledge, kept
between runs so that `llmfix ask` starts fast.

Every file is plain JSON that llmfix wrote itself (reading it runs no code), named by a digest of
what it was built from, written atomically, and re-validated by its reader: a damaged or foreign
file is rebuilt, never trusted. Only the newest few files of each kind are kept. An unwritable
cache folder means no cache, never an error.
"""
from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ArtifactError
from ..files import read_bytes

MAX_CACHE_BYTES = 64 * 1024 * 1024
KEEP_CACHE_FILES = 8  # per kind (parsed-*, knowledge-*, matcher-*, ...): older ones are deleted on save


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llmfix"


def digest(data: bytes) -> str:
    """16 hex digits naming a cache file: CRC-32 and Adler-32 side by side, which tell versions
    apart as well as a cryptographic hash here (nobody forges our own cache keys) and cost no
    OpenSSL load at start (``hashlib`` alone is ~5 % of a warm `llmfix ask`)."""
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def stamp(path: Path) -> list[int]:
    """Size, mtime and ctime of a file; zeros when it cannot be stat-ed (reading it says why).

    Any write changes ctime, which `touch -d` / `os.utime` cannot set back, so an edit that keeps
    size and mtime still changes the stamp."""
    try:
        st = os.stat(path)
    except OSError:
        return [0, 0, 0]
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def load_json(path: Path) -> Any:
    try:
        return json.loads(read_bytes(path, MAX_CACHE_BYTES))
    except (ArtifactError, ValueError, RecursionError):
        return None


def save_json(path: Path, value: Any) -> None:
    """Write atomically, then delete all but the newest KEEP_CACHE_FILES of the same kind."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        # ASCII with \u escapes: json parses a pure-ASCII text ~3x faster than one holding Chinese
        tmp.write_text(json.dumps(value), encoding="ascii")
        tmp.replace(path)
        kind = path.name.split("-", 1)[0]
        same = sorted(path.parent.glob(f"{kind}-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in same[KEEP_CACHE_FILES:]:
            old.unlink(missing_ok=True)
    except (OSError, TypeError, ValueError):
        pass  # read-only home, or a YAML value JSON cannot hold: simply no cache


def memo(kb, name: str, build: Callable[[], Any], code: str,
         valid: Callable[[Any], bool] = lambda value: value is not None) -> Any:
    """A JSON-able value derived from the knowledge (the matcher's index), cached per knowledge
    fingerprint and per version (content) of the ``code`` file that builds it; a cached value
    that ``valid`` rejects (a damaged or foreign file) is rebuilt."""
    version = digest(f"{kb.fingerprint}:".encode() + Path(code).read_bytes())
    path = cache_dir() / f"{name}-{version}.json"
    if kb.fingerprint:
        cached = load_json(path)
        if cached is not None and valid(cached):
            return cached
    value = build()
    if kb.fingerprint:
        save_json(path, value)
    return value
