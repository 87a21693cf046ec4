"""JSON records as data batches: .jsonl streamed line by line, .json parsed whole (capped).

Records with token ids become padded rows with their line numbers; records with ``text``, ``messages`` /
``conversations``, ``prompt`` (+ ``completion`` / ``response``) or ``instruction`` (+ ``output``)
become ``TextRecord``s whose ``target`` is the supervised part, e.g.::

    {"prompt": "Q: 2+2?", "completion": " 4"}   ->  TextRecord(line=1, text="Q: 2+2? 4", target=" 4")
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...errors import ArtifactError
from .rows import (ID_KEYS, MAX_JSON_BYTES, MAX_ROWS, MAX_TEXT_CHARS, MAX_TEXT_RECORDS, META_KEYS, SEQ_KEYS,
                   SNIFF_LINES, TEXT_KEYS, Batch, TextRecord, as_rows, pad_into, scalar)


def head_records(path: Path) -> list[dict]:
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


def record_kind(records: list[dict]) -> str | None:
    keys = {k for r in records for k in r}
    if any(k in keys for k in ID_KEYS):
        return "token ids"
    if "messages" in keys or "conversations" in keys:
        return "chat messages"
    if any(k in keys for k in TEXT_KEYS):
        return "text"
    return None  # includes metrics logs: {"step": 10, "loss": 2.3}


def count_records(path: Path) -> str:
    """Non-empty lines of a .jsonl (exact below 256 MB, estimated above) or records of a .json."""
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        with open(path, "rb") as f:
            head = f.read(1 << 22)
        lines = max(head.count(b"\n"), 1)
        return f"~{int(size / len(head) * lines)}"
    with open(path, "rb") as f:
        data = f.read()
    if data.lstrip().startswith(b"[") or path.suffix.lower() == ".json":
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            doc = None  # a .json holding JSON lines
        if isinstance(doc, list):
            return str(len(doc))
        if isinstance(doc, dict):  # a dict of columns
            return str(max((len(v) for v in doc.values() if isinstance(v, list)), default=0))
    return str(sum(1 for line in data.splitlines() if line.strip()))


def read_json(path: Path) -> Batch:
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
            if key in rec and key not in batch.meta and scalar(rec[key]) is not None:
                batch.meta[key] = scalar(rec[key])
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
                rows[canon] = as_rows(values, canon, batch.lines)
            except ValueError as err:
                if canon == "input_ids":
                    raise ArtifactError(path, str(err)) from None
                batch.problems.append(str(err))
        pad_into(batch, rows)
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
