"""Opening user files safely: regular files only, read with a byte budget.

A FIFO named ``config.json`` blocks ``open()`` forever and a symlink to ``/dev/zero`` never ends,
so every file llmfix reads whole goes through ``read_bytes``: it refuses anything that is not a
regular file (after following symlinks) and anything larger than the caller's limit, with the
reason in one line (docs/resource-policy.md).
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import BinaryIO

from .errors import ArtifactError


def _stat(path: str | Path, missing: str) -> os.stat_result:
    """``os.stat``, or ArtifactError with ``missing`` or the reason it cannot be read."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise ArtifactError(path, missing) from None
    except OSError as err:
        raise ArtifactError(path, f"cannot read: {err.strerror or err}") from None


def regular_file(path: str | Path) -> os.stat_result:
    """``stat`` of a regular file, or ArtifactError saying what the path is instead."""
    st = _stat(path, "no such file (or a dangling symlink)")
    if stat.S_ISDIR(st.st_mode):
        raise ArtifactError(path, "is a directory, expected a file")
    if not stat.S_ISREG(st.st_mode):
        raise ArtifactError(path, "not a regular file (a pipe, device or socket); llmfix reads regular files only")
    return st


def readable_folder(path: str | Path) -> Path:
    """``path`` as a folder whose entries can be listed, or ArtifactError saying what it is instead
    (a command given a folder answers one line, never click's usage text or a traceback)."""
    if not stat.S_ISDIR(_stat(path, "no such folder").st_mode):
        raise ArtifactError(path, "not a folder")
    try:
        with os.scandir(path):
            pass
    except OSError as err:
        raise ArtifactError(path, f"cannot read: {err.strerror or err}") from None
    return Path(path)


def open_regular(path: str | Path) -> BinaryIO:
    """A regular file opened for binary reading, or ArtifactError saying why it cannot be
    (an unreadable file is one line naming it, never a PermissionError traceback)."""
    regular_file(path)
    try:
        return open(path, "rb")  # noqa: SIM115 - the caller closes it
    except OSError as err:
        raise ArtifactError(path, f"cannot read: {err.strerror or err}") from None


def read_bytes(path: str | Path, limit: int) -> bytes:
    """The whole file, when it is a regular file of at most ``limit`` bytes."""
    st = regular_file(path)
    if st.st_size > limit:
        raise ArtifactError(path, f"too large to read whole ({st.st_size:,} bytes; the limit is {limit:,})")
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as err:
        raise ArtifactError(path, f"cannot read: {err.strerror or err}") from None
    if len(data) > limit:  # grew while we read it
        raise ArtifactError(path, f"too large to read whole (over {limit:,} bytes)")
    return data


def read_text(path: str | Path, limit: int) -> str:
    """``read_bytes`` decoded as UTF-8 (a BOM is dropped); ArtifactError when it is not UTF-8."""
    try:
        return read_bytes(path, limit).decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ArtifactError(path, f"not UTF-8 text (byte {err.start})") from None


def parse_json(data: bytes | str, path: str | Path):
    """``json.loads`` with one-line ArtifactErrors: invalid JSON, nesting too deep for the parser,
    or an integer over Python's 4300-digit conversion limit."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ArtifactError(path, "unreadable JSON (nested too deeply)") from None
    except UnicodeDecodeError as err:
        raise ArtifactError(path, f"not UTF-8 text (byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise ArtifactError(path, f"unreadable JSON ({err.msg}, line {err.lineno} column {err.colno})") from None
    except ValueError as err:  # int too long to convert
        raise ArtifactError(path, f"unreadable JSON ({str(err)[:80]})") from None


def read_json(path: str | Path, limit: int):
    """A whole JSON file of at most ``limit`` bytes (``read_bytes`` then ``parse_json``)."""
    return parse_json(read_bytes(path, limit), path)
