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
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ArtifactError
from ...observations import Artifact
from ..tensors import load_pickle, safetensors_header

MAX_ROWS = 4096
MAX_TOKENS = 8_000_000
MAX_SEQ = 65_536
MAX_TEXT_RECORDS = 20_000
MAX_TEXT_CHARS = 64_000_000
MAX_JSON_BYTES = 256 * 1024 * 1024   # a single .json document is parsed whole; .jsonl streams
SNIFF_LINES = 20

# canonical name -> accepted spellings (Megatron / OLMo call input ids "tokens")
SEQ_KEYS = {"input_ids": ("input_ids", "tokens", "token_ids"),
            "attention_mask": ("attention_mask",),
            "labels": ("labels", "label_ids", "target_ids"),
            "loss_mask": ("loss_mask",),
            "position_ids": ("position_ids",)}
FILL = {"input_ids": 0, "attention_mask": 0, "labels": -100, "loss_mask": 0, "position_ids": 0}
META_KEYS = ("eos_token_id", "pad_token_id", "bos_token_id", "vocab_size")
TEXT_KEYS = ("text", "messages", "conversations", "prompt", "instruction")
WRAPPERS = ("batch", "inputs", "data", "micro_batch", "sample")
ID_KEYS = SEQ_KEYS["input_ids"]
PICKLE_SUFFIXES = (".pt", ".pth")
JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")


@dataclass
class TextRecord:
    """One text sample: ``text`` is everything, ``target`` the supervised part (None = all of it)."""

    line: int
    text: str
    target: str | None = None
    messages: list[dict] | None = None


@dataclass
class Batch:
    path: Path
    fmt: str                                   # pt | safetensors | jsonl | json
    seqs: dict[str, Any] = field(default_factory=dict)    # name -> [rows, T] tensor
    lengths: Any = None                        # [rows] record lengths when records are ragged
    other: dict[str, Any] = field(default_factory=dict)   # other tensors (floats, 4-D masks)
    texts: list[TextRecord] = field(default_factory=list)
    lines: list[int] | None = None             # 1-based line number of each token row (jsonl)
    meta: dict[str, Any] = field(default_factory=dict)    # eos_token_id ... found in the file
    id_key: str = "input_ids"                  # spelling the file used
    rows_total: int | None = None              # samples in the file, when known
    notes: list[str] = field(default_factory=list)        # caps that bit, records skipped
    problems: list[str] = field(default_factory=list)     # shape mismatches between keys

    @property
    def rows(self) -> int:
        ids = self.seqs.get("input_ids")
        return 0 if ids is None else int(ids.shape[0])

    @property
    def valid(self):
        """[rows, T] bool: True where a position holds data (always, unless records are ragged)."""
        import torch

        ids = self.seqs["input_ids"]
        if self.lengths is None:
            return torch.ones_like(ids, dtype=torch.bool)
        return torch.arange(ids.shape[1]).unsqueeze(0) < self.lengths.unsqueeze(1)

    def loc(self, row: int | None = None, pos: int | None = None) -> str:
        """"row 3, position 17" (tensors) or "line 4, position 17" (jsonl)."""
        parts = []
        if row is not None:
            parts.append(f"line {self.lines[row]}" if self.lines else f"row {row}")
        if pos is not None:
            parts.append(f"position {pos}")
        return ", ".join(parts)

    def where(self, row: int | None = None, pos: int | None = None) -> str:
        loc = self.loc(row, pos)
        return f"{self.path}: {loc}" if loc else str(self.path)


# ---------------------------------------------------------------------------------------- sniff

def sniff(path: Path) -> Artifact | None:
    """An Artifact of kind "batch" when ``path`` holds a data batch, else None (cheap)."""
    path = Path(path)
    if not path.is_file():
        return None
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        header = safetensors_header(path)
        key = next((k for k in ID_KEYS if k in header), None)
        if key is None:
            return None
        names = [k for k in header if not k.startswith("__")]
        shape = "x".join(str(s) for s in header[key].get("shape", []))
        return Artifact(str(path), "batch", f"tensor batch {shape} ({', '.join(names[:6])})")
    if suffix in PICKLE_SUFFIXES:
        obj = _load_pickle_cached(path)
        columns = _columns(obj)
        if columns is None:
            return None
        ids = columns[next(k for k in ID_KEYS if k in columns)]
        return Artifact(str(path), "batch", f"tensor batch {_shape_text(ids)} ({', '.join(list(columns)[:6])})")
    if suffix in JSON_SUFFIXES:
        from .records import count_records, head_records, record_kind

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
        return _from_columns(path, "pt", _columns(_load_pickle_cached(path)))
    if suffix in JSON_SUFFIXES:
        from .records import read_json

        return read_json(path)
    raise ArtifactError(path, "not a data batch (.pt, .safetensors, .jsonl or .json expected)")


def _read_safetensors(path: Path) -> Batch:
    from ..tensors import iter_tensors

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


def scalar(value: Any) -> int | list[int] | None:
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return value
    return None


def as_rows(value: Any, name: str, lines: list[int] | None = None) -> list | Any:
    """A 2-D tensor stays whole; anything else becomes a list of 1-D tensors (one per sample)."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.dim() == 0:
            raise ValueError(f"{name} is a scalar, not a sequence")
        if value.dim() == 1:
            return value.unsqueeze(0)
        return value.reshape(-1, value.shape[-1]) if value.dim() > 2 else value
    if isinstance(value, list):
        if value and all(isinstance(v, (int, float)) for v in value):
            value = [value]
        out = []
        for i, row in enumerate(value):
            try:
                out.append(row.flatten() if isinstance(row, torch.Tensor) else torch.tensor(row))
            except (TypeError, ValueError, RuntimeError):
                where = f"line {lines[i]}" if lines and i < len(lines) else f"row {i}"
                raise ValueError(f"{where}: {name} is not a list of numbers") from None
        return out
    raise ValueError(f"{name} is neither a tensor nor a list (got {type(value).__name__})")


def pad_into(batch: Batch, rows: dict[str, Any]) -> None:
    """Fill ``batch.seqs`` (and ``lengths`` for ragged rows), applying the row/token caps."""
    import torch

    ids = rows["input_ids"]
    n = ids.shape[0] if isinstance(ids, torch.Tensor) else len(ids)
    batch.rows_total = batch.rows_total or n
    for name, value in list(rows.items()):
        count = value.shape[0] if isinstance(value, torch.Tensor) else len(value)
        if name != "input_ids" and count != n:
            batch.problems.append(f"{name} has {count} rows but input_ids has {n}")
            del rows[name]
    if isinstance(ids, torch.Tensor):
        keep = min(n, MAX_ROWS, max(1, MAX_TOKENS // max(1, ids.shape[1])))
        if keep < n:
            batch.notes.append(f"checked the first {keep} of {n} rows (cap {MAX_ROWS} rows / {MAX_TOKENS} tokens)")
        for name, value in rows.items():
            if isinstance(value, torch.Tensor) and value.shape != ids.shape:
                batch.problems.append(f"{name} has shape {tuple(value.shape)} but input_ids has {tuple(ids.shape)}")
                continue
            if not isinstance(value, torch.Tensor):
                value = _stack(value, FILL[name], ids.shape[1], batch)[0]
            batch.seqs[name] = value[:keep]
        return
    lengths = [len(r) for r in ids]
    width = min(max(lengths, default=0), MAX_SEQ)
    if width == 0:
        raise ArtifactError(batch.path, "every record has an empty input_ids")
    empty = [i for i, n in enumerate(lengths) if n == 0]
    if empty:
        batch.problems.append(f"{len(empty)} record(s) have no tokens at all, e.g. {batch.loc(empty[0])}: "
                              "they become all-padding rows with no target")
    keep = n
    while keep > 1 and keep * width > MAX_TOKENS:
        keep //= 2
    keep = min(keep, MAX_ROWS)
    if keep < n:
        batch.notes.append(f"checked the first {keep} of {n} records (cap {MAX_ROWS} rows / {MAX_TOKENS} tokens)")
    if max(lengths, default=0) > MAX_SEQ:
        batch.notes.append(f"records longer than {MAX_SEQ} tokens were cut at {MAX_SEQ}")
    for name, value in rows.items():
        value = value[:keep] if not isinstance(value, torch.Tensor) else list(value[:keep])
        if name != "input_ids":
            bad = [i for i, (a, b) in enumerate(zip(value, ids)) if len(a) != len(b)]
            if bad:
                batch.problems.append(f"{name} and input_ids differ in length in {len(bad)} record(s), "
                                      f"e.g. {batch.loc(bad[0])}: {len(value[bad[0]])} vs {len(ids[bad[0]])}")
        batch.seqs[name] = _stack(value, FILL[name], width, batch)[0]
    batch.lengths = torch.tensor([min(x, width) for x in lengths[:keep]], dtype=torch.long)
    if batch.lines:
        batch.lines = batch.lines[:keep]
    if bool((batch.lengths == width).all()):
        batch.lengths = None  # rectangular after all


def _stack(rows: list, fill: int, width: int, batch: Batch):
    import torch

    dtype = torch.float32 if any(r.is_floating_point() for r in rows) else torch.long
    out = torch.full((len(rows), width), fill, dtype=dtype)
    for i, r in enumerate(rows):
        r = r[:width]
        out[i, :len(r)] = r.to(dtype)
    return out, dtype


