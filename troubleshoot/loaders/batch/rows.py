"""The ``Batch`` every batch file is read into, and how rows of token ids become padded tensors.

Both readers (tensor files in ``loaders/batch/__init__.py``, JSON records in ``records.py``) build
a Batch through ``as_rows`` and ``pad_into``, which apply the caps on rows and tokens.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ArtifactError

MAX_ROWS = 4096
MAX_TOKENS = 2_000_000
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
        cols = min(ids.shape[1], MAX_SEQ)
        keep = min(n, MAX_ROWS, max(1, MAX_TOKENS // max(1, cols)))
        if keep < n:
            batch.notes.append(f"checked the first {keep} of {n} rows (cap {MAX_ROWS} rows / {MAX_TOKENS} tokens)")
        if cols < ids.shape[1]:
            batch.notes.append(f"rows longer than {MAX_SEQ} tokens were cut at {MAX_SEQ}")
        for name, value in rows.items():
            if isinstance(value, torch.Tensor) and value.shape != ids.shape:
                batch.problems.append(f"{name} has shape {tuple(value.shape)} but input_ids has {tuple(ids.shape)}")
                continue
            if not isinstance(value, torch.Tensor):
                value = _stack(value, FILL[name], ids.shape[1], batch)[0]
            batch.seqs[name] = value[:keep, :cols]
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


