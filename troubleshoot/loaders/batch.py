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

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ArtifactError
from ..observations import Artifact
from .tensors import load_pickle, safetensors_header

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
        records = _head_records(path)
        kind = _record_kind(records)
        if kind is None:
            return None
        n = _count_records(path)
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


def _head_records(path: Path) -> list[dict]:
    """The first few JSON records of a .jsonl / .json file; [] when it is not JSON records."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 20)
    except OSError:
        return []
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if text.startswith("["):
        if path.stat().st_size > MAX_JSON_BYTES:
            return [{"text": ""}] if '"input_ids"' in text or '"text"' in text else []
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, OSError):
            return []
        return [r for r in data[:SNIFF_LINES] if isinstance(r, dict)] if isinstance(data, list) else []
    records = []
    for line in text.splitlines()[:SNIFF_LINES]:
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if not records and path.suffix.lower() == ".json":
                return _head_json_object(path)
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


def _head_json_object(path: Path) -> list[dict]:
    """A pretty-printed .json: a dict of columns ({"input_ids": [[...]]}) counts as records."""
    if path.stat().st_size > MAX_JSON_BYTES:
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, OSError):
        return []
    if isinstance(data, dict) and any(isinstance(data.get(k), list) for k in ID_KEYS + TEXT_KEYS):
        return [{k: None for k in data}]
    return []


def _record_kind(records: list[dict]) -> str | None:
    keys = {k for r in records for k in r}
    if any(k in keys for k in ID_KEYS):
        return "token ids"
    if "messages" in keys or "conversations" in keys:
        return "chat messages"
    if any(k in keys for k in TEXT_KEYS):
        return "text"
    return None  # includes metrics logs: {"step": 10, "loss": 2.3}


def _count_records(path: Path) -> str:
    """Non-empty lines of a .jsonl (exact below 256 MB, estimated above) or records of a .json."""
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        with open(path, "rb") as f:
            head = f.read(1 << 22)
        lines = max(head.count(b"\n"), 1)
        return f"~{int(size / len(head) * lines)}"
    with open(path, "rb") as f:
        data = f.read()
    if data.lstrip().startswith(b"["):
        try:
            return str(len(json.loads(data)))
        except (ValueError, UnicodeDecodeError):
            return "?"
    return str(sum(1 for line in data.splitlines() if line.strip()))


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
        return _read_json(path)
    raise ArtifactError(path, "not a data batch (.pt, .safetensors, .jsonl or .json expected)")


def _read_safetensors(path: Path) -> Batch:
    from .tensors import iter_tensors

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
            scalar = _scalar(value)
            if scalar is not None:
                batch.meta[name] = scalar
        elif canon is not None and not (canon == "input_ids" and name != id_key):
            ids = columns[id_key]
            if isinstance(value, torch.Tensor) and value.dim() > 2 and canon not in ("input_ids", "labels") \
                    and not (isinstance(ids, torch.Tensor) and value.shape == ids.shape):
                batch.other[name] = value          # [B, 1, T, T] attention masks and the like
                continue
            try:
                rows[canon] = _as_rows(value, name)
            except ValueError as err:
                batch.problems.append(str(err))
        elif name == "text" and isinstance(value, list):
            batch.texts = [TextRecord(i + 1, t) for i, t in enumerate(value) if isinstance(t, str)]
        elif isinstance(value, torch.Tensor):
            batch.other[name] = value
    if "input_ids" not in rows:
        raise ArtifactError(path, f"{id_key} is not a tensor or a list of token-id lists")
    _pad_into(batch, rows)
    return batch


def _scalar(value: Any) -> int | list[int] | None:
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return value
    return None


def _as_rows(value: Any, name: str, lines: list[int] | None = None) -> list | Any:
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


def _pad_into(batch: Batch, rows: dict[str, Any]) -> None:
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


def _read_json(path: Path) -> Batch:
    """Stream a .jsonl (or parse a .json) into token rows and text records, within the caps."""
    batch = Batch(path=path, fmt=path.suffix.lower().lstrip("."))
    token_recs: list[tuple[int, dict]] = []
    bad: list[int] = []
    chars = seen = 0
    for line_no, rec in _iter_records(path, bad):
        seen += 1
        if not isinstance(rec, dict):
            bad.append(line_no)
            continue
        for key in META_KEYS:
            if key in rec and key not in batch.meta and _scalar(rec[key]) is not None:
                batch.meta[key] = _scalar(rec[key])
        if any(k in rec for k in ID_KEYS) and len(token_recs) < MAX_ROWS:
            token_recs.append((line_no, rec))
        text = _text_record(line_no, rec)
        if text is not None and len(batch.texts) < MAX_TEXT_RECORDS and chars < MAX_TEXT_CHARS:
            batch.texts.append(text)
            chars += len(text.text)
        rows_full = len(token_recs) >= MAX_ROWS
        text_full = len(batch.texts) >= MAX_TEXT_RECORDS or chars >= MAX_TEXT_CHARS
        if (rows_full and (text_full or not batch.texts)) or (text_full and not token_recs):
            batch.notes.append(f"stopped reading after {seen} records (caps: {MAX_ROWS} token rows, "
                               f"{MAX_TEXT_RECORDS} text records, {MAX_TEXT_CHARS:,} characters)")
            break
    if bad:
        batch.problems.append(f"{len(bad)} line(s) are not JSON objects, e.g. line {bad[0]}")
    if not token_recs and not batch.texts:
        raise ArtifactError(path, "no record with input_ids, text, messages or prompt was found")
    batch.rows_total = seen
    if token_recs:
        batch.lines = [line for line, _ in token_recs]
        batch.id_key = next(k for k in ID_KEYS if k in token_recs[0][1])
        rows: dict[str, Any] = {}
        for canon, spellings in SEQ_KEYS.items():
            keys = (batch.id_key,) if canon == "input_ids" else spellings
            values = [next((rec[k] for k in keys if k in rec), None) for _, rec in token_recs]
            if all(v is None for v in values):
                continue
            if any(v is None for v in values):
                line = batch.lines[values.index(None)]
                if canon == "input_ids":
                    raise ArtifactError(path, f"line {line}: record has no {batch.id_key}")
                batch.problems.append(f"{canon} is missing in some records, e.g. line {line}")
                values = [v if v is not None else [] for v in values]
            try:
                rows[canon] = _as_rows(values, canon, batch.lines)
            except ValueError as err:
                if canon == "input_ids":
                    raise ArtifactError(path, str(err)) from None
                batch.problems.append(str(err))
        _pad_into(batch, rows)
    return batch


def _iter_records(path: Path, bad: list[int]):
    size = path.stat().st_size
    with open(path, "rb") as f:
        start = f.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    if start.startswith((b"[", b"{")) and path.suffix.lower() == ".json":
        if size > MAX_JSON_BYTES:
            raise ArtifactError(path, f"JSON document of {size >> 20} MB is over the {MAX_JSON_BYTES >> 20} MB "
                                      "cap; write it as .jsonl (one record per line) to stream it")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            if not start.startswith(b"["):
                data = None  # maybe .json holding JSON lines
            else:
                raise ArtifactError(path, f"invalid JSON: {err}") from None
        if isinstance(data, dict):
            n = max((len(v) for v in data.values() if isinstance(v, list)), default=0)
            data = [{k: v[i] for k, v in data.items() if isinstance(v, list) and i < len(v)} for i in range(n)]
        if isinstance(data, list):
            yield from ((i + 1, rec) for i, rec in enumerate(data))
            return
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield line_no, json.loads(line)
            except json.JSONDecodeError:
                bad.append(line_no)


def _text_record(line: int, rec: dict) -> TextRecord | None:
    """Normalise the common SFT layouts to text (+ the supervised part)."""
    if isinstance(rec.get("text"), str):
        return TextRecord(line, rec["text"])
    turns = rec.get("messages", rec.get("conversations"))
    if isinstance(turns, list):
        messages = []
        for turn in turns:
            if isinstance(turn, dict):
                role = str(turn.get("role", turn.get("from", "")))
                content = turn.get("content", turn.get("value", ""))
                messages.append({"role": {"human": "user", "gpt": "assistant"}.get(role, role),
                                 "content": content if isinstance(content, str) else json.dumps(content)})
        target = "\n".join(m["content"] for m in messages if m["role"] in ("assistant", "model"))
        return TextRecord(line, "\n".join(m["content"] for m in messages), target, messages)
    if isinstance(rec.get("prompt"), str):
        answer = next((rec[k] for k in ("completion", "response", "chosen", "output")
                       if isinstance(rec.get(k), str)), "")
        return TextRecord(line, rec["prompt"] + answer, answer)
    if isinstance(rec.get("instruction"), str):
        answer = rec.get("output") if isinstance(rec.get("output"), str) else ""
        extra = rec.get("input") if isinstance(rec.get("input"), str) else ""
        return TextRecord(line, "\n".join(x for x in (rec["instruction"], extra, answer) if x), answer)
    return None

