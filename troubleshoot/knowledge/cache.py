"""The user's cache folder (``~/.cache/llmfix``): what llmfix derives from the knowledge, kept
between runs so that `llmfix ask` starts fast.

Every file holds plain data only (dicts, lists, text, numbers) that llmfix wrote itself, in
``marshal`` format: Python's own serialisation of those types, which a warm start reads ~4x
faster than the same data as JSON (docs/resource-policy.md, "Cache files", says why that is safe
here and pickle would not be). Files are named by a digest of what they were built from and of the
Python version (marshal's format follows it), written atomically, and re-validated by their
readers: a damaged or foreign file is rebuilt, never trusted. Only the newest few of each kind
are kept. An unwritable cache folder means no cache, never an error.
"""
from __future__ import annotations

import marshal
import os
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ArtifactError
from ..files import read_bytes

MAX_CACHE_BYTES = 64 * 1024 * 1024
KEEP_CACHE_FILES = 8  # per kind (parsed-*, knowledge-*, matcher-*, ...): older ones are deleted on save
FORMAT = f"python {sys.version_info[0]}.{sys.version_info[1]} marshal {marshal.version}"
SUFFIX = ".marshal"


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llmfix"


def digest(data: bytes) -> str:
    """16 hex digits naming a cache file: CRC-32 and Adler-32 side by side, which tell versions
    apart as well as a cryptographic hash here (nobody forges our own cache keys) and cost no
    OpenSSL load at start (importing ``hashlib`` alone was ~5 % of a warm `llmfix ask`)."""
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def path(kind: str, built_from: bytes) -> Path:
    """The cache file of one ``kind`` (parsed, knowledge, matcher, ...) for this Python version."""
    return cache_dir() / f"{kind}-{digest(built_from + FORMAT.encode())}{SUFFIX}"


def stamp(file: Path) -> list[int]:
    """Size, mtime and ctime of a file; zeros when it cannot be stat-ed (reading it says why).

    Any write changes ctime, which `touch -d` / `os.utime` cannot set back, so an edit that keeps
    size and mtime still changes the stamp."""
    try:
        st = os.stat(file)
    except OSError:
        return [0, 0, 0]
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def load(file: Path) -> Any:
    """The value saved in ``file``, or None (missing, unreadable, or not marshal data)."""
    try:
        return marshal.loads(read_bytes(file, MAX_CACHE_BYTES))
    except (ArtifactError, EOFError, ValueError, TypeError):
        return None


def save(file: Path, value: Any) -> None:
    """Write atomically, then delete all but the newest KEEP_CACHE_FILES of the same kind."""
    try:
        data = marshal.dumps(value)
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(file)
        kind = file.name.split("-", 1)[0]
        same = sorted(file.parent.glob(f"{kind}-*{SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in same[KEEP_CACHE_FILES:]:
            old.unlink(missing_ok=True)
    except (OSError, ValueError):
        pass  # read-only home, or a YAML value marshal cannot hold (a date): simply no cache


def memo(kb, name: str, build: Callable[[], Any], code: str | tuple[str, ...],
         valid: Callable[[Any], bool] = lambda value: value is not None) -> Any:
    """A value derived from the knowledge (the matcher's index), cached per knowledge fingerprint
    and per version (content) of the ``code`` files that build it (the module and any module whose
    functions it calls: an edited tokenizer must rebuild the indexes made with it); a cached value
    that ``valid`` rejects (a damaged or foreign file) is rebuilt."""
    files = (code,) if isinstance(code, str) else code
    file = path(name, f"{kb.fingerprint}:".encode() + b"\0".join(Path(f).read_bytes() for f in files))
    if kb.fingerprint:
        cached = load(file)
        if cached is not None and valid(cached):
            return cached
    value = build()
    if kb.fingerprint:
        save(file, value)
    return value
