"""Recognise and read one data batch: tensors (.pt / .safetensors) or records (.jsonl / .json).

What counts as a batch (``sniff``):

- ``.safetensors`` whose header names ``input_ids`` (or ``tokens``); no tensor data is read.
- ``.pt`` / ``.pth`` loaded with ``weights_only=True`` holding ``input_ids``: a dict of tensors
  or of nested lists, a list of per-sample dicts, or one of those under ``batch`` / ``inputs``.
- ``.jsonl`` / ``.json`` whose records carry ``input_ids``, ``text``, ``messages`` /
  ``conversations``, ``prompt`` (+ ``completion`` / ``response``) or ``instruction`` + ``output``.
  Records with ``loss`` and none of those keys are a metrics log and left to the log loader.

``read`` turns any of them into one ``Batch``: sequence tensors padded to ``[rows, T]`` (ragged
records get ``lengths``; positions past a record's end are not data and ``valid`` is False there),
the text of text records, and the special ids a batch may carry itself (``eos_token_id``).

Caps keep the work bounded whatever the file size; each cap that bit is listed in ``notes``:
``MAX_ROWS`` token rows, ``MAX_TOKENS`` rows x T, ``MAX_SEQ`` tokens per record,
``MAX_TEXT_RECORDS`` text records and ``MAX_TEXT_CHARS`` characters of text.

This module sniffs and reads tensor files; the ``Batch`` type, the caps and the padding live in
``rows.py``, JSON records in ``records.py``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import ArtifactError
from ...observations import Artifact
from ..tensors import iter_tensors, list_safetensors, load_pickle, safetensors_header
from ..torchzip import materialize
from .records import count_records, head_records, read_json, record_kind
from .rows import (
    ID_KEYS,
    JSON_SUFFIXES,
    MAX_JSON_BYTES,
    MAX_ROWS,
    MAX_SEQ,
    MAX_TEXT_CHARS,
    MAX_TEXT_RECORDS,
    MAX_TOKENS,
    META_KEYS,
    PICKLE_SUFFIXES,
    SEQ_KEYS,
    WRAPPERS,
    Batch,
    TextRecord,
    as_rows,
    pad_into,
    scalar,
)

__all__ = ["MAX_JSON_BYTES", "MAX_ROWS", "MAX_SEQ", "MAX_TEXT_CHARS", "MAX_TEXT_RECORDS", "MAX_TOKENS", "Batch",
           "TextRecord", "read", "sniff"]

# ---------------------------------------------------------------------------------------- sniff

def sniff(path: Path) -> Artifact | None:
    """An Artifact of kind "batch" when ``path`` holds a data batch, else None (cheap)."""
    path = Path(path)
    if not path.is_file():
        return None
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        infos = {info.name: info for info in list_safetensors(path)}
        key = next((k for k in ID_KEYS if k in infos), None)
        if key is None:
            return None
        names = list(infos)
        shape = "x".join(str(s) for s in infos[key].shape)
        return Artifact(str(path), "batch", f"tensor batch {shape} ({', '.join(names[:6])})")
    if suffix in PICKLE_SUFFIXES:
        obj = _load_pickle_cached(path)
        columns = _columns(obj)
        if columns is None:
            return None
        ids = columns[next(k for k in ID_KEYS if k in columns)]
        return Artifact(str(path), "batch", f"tensor batch {_shape_text(ids)} ({', '.join(list(columns)[:6])})")
    if suffix in JSON_SUFFIXES:
        records = head_records(path)
        kind = record_kind(records)
        if kind is None:
            return None
        n = count_records(path)
        return Artifact(str(path), "batch", f"{suffix[1:]} {kind}, {n} samples")
    return None


def _shape_text(value: Any) -> str:
    if hasattr(value, "shape"):
        return "x".join(str(s) for s in value.shape) or "scalar"
    if isinstance(value, list):
        inner = value[0] if value else []
        return f"{len(value)}x{len(inner)}" if isinstance(inner, list) else f"{len(value)}"
    return "?"


_PICKLE_CACHE: dict[tuple, Any] = {}


def _load_pickle_cached(path: Path) -> Any:
    """sniff and read both need the object; load once per (path, size, mtime)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _PICKLE_CACHE:
        _PICKLE_CACHE.clear()
        _PICKLE_CACHE[key] = load_pickle(path)
    return _PICKLE_CACHE[key]


# ----------------------------------------------------------------------------------------- read

def read(path: str | Path) -> Batch:
    """Read a batch file into a ``Batch``; ArtifactError (one line) when it cannot be read."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        return _read_safetensors(path)
    if suffix in PICKLE_SUFFIXES:
        return _from_columns(path, "pt", materialize(_columns(_load_pickle_cached(path))))
    if suffix in JSON_SUFFIXES:
        return read_json(path)
    raise ArtifactError(path, "not a data batch (.pt, .safetensors, .jsonl or .json expected)")


def _read_safetensors(path: Path) -> Batch:
    header = safetensors_header(path)
    columns: dict[str, Any] = dict(iter_tensors(path))
    for key, value in (header.get("__metadata__") or {}).items():
        if key in META_KEYS and str(value).lstrip("-").isdigit():
            columns.setdefault(key, int(value))
    return _from_columns(path, "safetensors", columns)


def _columns(obj: Any) -> dict[str, Any] | None:
    """Find the column dict ({"input_ids": ..., ...}) inside a loaded object, else None."""
    for _ in range(3):
        if isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj[:8]):
            keys = list(dict.fromkeys(k for r in obj for k in r))
            return {k: [r.get(k) for r in obj] for k in keys} if any(k in keys for k in ID_KEYS) else None
        if not isinstance(obj, dict):
            return None
        if any(k in obj for k in ID_KEYS):
            return obj
        obj = next((obj[k] for k in WRAPPERS if isinstance(obj.get(k), (dict, list))), None)
    return None


def _from_columns(path: Path, fmt: str, columns: dict[str, Any] | None) -> Batch:
    import torch

    if columns is None:
        raise ArtifactError(path, "holds no input_ids (expected a dict or list of samples with input_ids)")
    batch = Batch(path=path, fmt=fmt)
    id_key = next(k for k in ID_KEYS if k in columns)
    batch.id_key = id_key
    rows: dict[str, list] = {}
    for name, value in columns.items():
        canon = next((c for c, spellings in SEQ_KEYS.items() if name in spellings), None)
        if name in META_KEYS:
            found = scalar(value)
            if found is not None:
                batch.meta[name] = found
        elif canon is not None and not (canon == "input_ids" and name != id_key):
            ids = columns[id_key]
            if isinstance(value, torch.Tensor) and value.dim() > 2 and canon not in ("input_ids", "labels") \
                    and not (isinstance(ids, torch.Tensor) and value.shape == ids.shape):
                batch.other[name] = value          # [B, 1, T, T] attention masks and the like
                continue
            try:
                rows[canon] = as_rows(value, name)
            except ValueError as err:
                batch.problems.append(str(err))
        elif name == "text" and isinstance(value, list):
            batch.texts = [TextRecord(i + 1, t) for i, t in enumerate(value) if isinstance(t, str)]
        elif isinstance(value, torch.Tensor):
            batch.other[name] = value
    if "input_ids" not in rows:
        raise ArtifactError(path, f"{id_key} is not a tensor or a list of token-id lists")
    pad_into(batch, rows)
    return batch
