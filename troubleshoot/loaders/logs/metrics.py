"""Structured metric logs: JSONL, CSV, HF ``trainer_state.json`` and TensorBoard event files.

Every entry goes through ``record_from_dict`` (one key vocabulary for all of them) and the readers
stream: JSONL and CSV line by line, ``trainer_state.json`` one ``log_history`` entry at a time (a
2 GB state file is never loaded whole), event files through the optional ``tensorboard`` package.
"""
from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from ...errors import ArtifactError
from .record import Record, metric_slot, record_from_dict
from .text import CHUNK, encoding_of, iter_lines

MAX_JSON_HEAD = 8 << 20    # trainer_state.json: bytes before "log_history" / after it


def jsonl_records(path: Path) -> Iterator[Record]:
    """One Record per JSON object line; an unparseable line is an error record, not a stop."""
    counter = 0
    for lineno, line in iter_lines(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):  # bad, 5000-deep or 4300+-digit JSON
            yield Record("error", None, line=lineno, text="unparseable JSON line")
            continue
        if isinstance(obj, dict):
            counter += 1
            rec = record_from_dict(obj, lineno, counter)
            if rec is not None:
                yield rec


def csv_separator(header: str) -> str:
    """Tab when the header has more tabs than commas (TSV), else comma."""
    return "\t" if header.count("\t") > header.count(",") else ","


def csv_records(path: Path) -> Iterator[Record]:
    """One Record per row, keyed by the header; rows that do not parse are skipped."""
    lines = iter_lines(path)
    try:
        _, header = next(lines)
    except StopIteration:
        return
    sep = csv_separator(header)
    cols = next(csv.reader([header], delimiter=sep))
    counter = 0
    for lineno, line in lines:
        if not line.strip():
            continue
        try:
            row = next(csv.reader([line], delimiter=sep))
        except (csv.Error, StopIteration):
            continue
        counter += 1
        rec = record_from_dict({c: v for c, v in zip(cols, row) if v != ""}, lineno, counter)
        if rec is not None:
            yield rec


# ---------------------------------------------------------------------------------------------
# trainer_state.json

def trainer_state_records(path: Path) -> Iterator[Record]:
    """Decode ``log_history`` one entry at a time; also yields the state's own save points.

    The top-level keys other than ``log_history`` are small; they are parsed from the bytes around
    the list. Records carry ``line`` = entry index + 1.
    """
    decoder = json.JSONDecoder()
    with open(path, "rb") as f:
        encoding = encoding_of(f.read(4))
    with open(path, encoding=encoding, errors="replace") as f:
        head, buf, pos = _find_log_history(f, path)
        index = 0
        while True:
            while True:  # skip separators, refilling the buffer as needed
                while pos < len(buf) and buf[pos] in " \t\r\n,":
                    pos += 1
                if pos < len(buf):
                    break
                buf, pos = buf[pos:] + _more(f, path, index), 0
            if buf[pos] == "]":
                break
            while True:
                try:
                    obj, end = decoder.raw_decode(buf, pos)
                    break
                except ValueError:
                    more = _more(f, path, index)
                    if len(buf) - pos > MAX_JSON_HEAD:
                        raise ArtifactError(path, f"log_history entry {index} is not valid JSON") from None
                    buf, pos = buf[pos:] + more, 0
            index += 1
            if isinstance(obj, dict):
                rec = record_from_dict(obj, index, index)
                if rec is not None:
                    yield rec
            pos = end
            if pos > CHUNK:
                buf, pos = buf[pos:], 0
        tail = buf[pos + 1:] + f.read(MAX_JSON_HEAD)
    yield from _save_points(path, head, tail)


def _find_log_history(f: IO[str], path: Path) -> tuple[str, str, int]:
    """(the state's keys before ``log_history`` as a JSON object, the buffer, the position just
    inside the list); reads at most MAX_JSON_HEAD to find it."""
    buf = f.read(CHUNK)
    start = buf.find('"log_history"')
    while start < 0 and len(buf) < MAX_JSON_HEAD:
        more = f.read(CHUNK)
        if not more:
            break
        buf += more
        start = buf.find('"log_history"')
    if start < 0:
        raise ArtifactError(path, "trainer_state.json without a log_history list")
    bracket = buf.find("[", start)
    while bracket < 0:  # the key ended right at a chunk boundary
        more = f.read(CHUNK)
        if not more:
            raise ArtifactError(path, "trainer_state.json: log_history is not followed by a list")
        buf += more
        bracket = buf.find("[", start)
    head = buf[:start].rstrip().rstrip(",") + "}"
    return head, buf, bracket + 1


def _more(f: IO[str], path: Path, index: int) -> str:
    """The next chunk of a state whose ``log_history`` is still open; the file ending is an error."""
    more = f.read(CHUNK)
    if not more:
        raise ArtifactError(path, f"truncated trainer_state.json after {index} log entries") from None
    return more


def _save_points(path: Path, head: str, tail: str) -> Iterator[Record]:
    """``save_steps`` (a meta record) and the ``checkpoint-N`` folder the state was saved in."""
    meta: dict = {}
    for text in (head, "{" + tail.lstrip().lstrip(",")):
        try:
            part = json.loads(text)
            meta.update(part if isinstance(part, dict) else {})
        except (ValueError, RecursionError):
            pass
    save_steps, global_step = meta.get("save_steps"), meta.get("global_step")
    if isinstance(save_steps, int) and save_steps > 0:
        yield Record("meta", save_steps, line=0, text="save_steps")
    if isinstance(global_step, int) and (m := re.fullmatch(r"checkpoint-(\d+)", path.parent.name)):
        yield Record("save", int(m.group(1)), line=0, text=f"folder {path.parent.name}")


# ---------------------------------------------------------------------------------------------
# TensorBoard

TB_TAGS = {"lm loss": "loss", "lm-loss-training/lm loss": "loss", "learning-rate": "lr",
           "learning-rate/learning-rate": "lr", "grad-norm": "grad_norm", "grad-norm/grad-norm": "grad_norm",
           "loss-scale": "loss_scale", "loss-scale/loss-scale": "loss_scale",
           "lm loss validation": "val_loss", "lm-loss-validation/lm loss validation": "val_loss"}


def tensorboard_records(path: Path) -> Iterator[Record]:
    """Scalars from a TensorBoard event file through the optional ``tensorboard`` package."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    except ImportError:
        raise ArtifactError(path, "tensorboard event file: reading it needs the optional "
                                  "'tensorboard' package (pip install tensorboard)") from None
    current: dict[str, float] = {}
    step = None
    n = 0
    for event in EventFileLoader(str(path)).Load():
        summary = getattr(event, "summary", None)
        for value in getattr(summary, "value", ()):
            slot = TB_TAGS.get(value.tag) or metric_slot(value.tag)
            if slot is None:
                continue
            v = _tb_value(value)
            if v is None:
                continue
            if step is not None and event.step != step and current:
                n += 1
                yield _tb_record(step, current, n)
                current = {}
            step = event.step
            current[slot] = v
    if current and step is not None:
        yield _tb_record(step, current, n + 1)


def _tb_value(value) -> float | None:
    """A scalar summary value (old ``simple_value`` or a one-element tensor), else None."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind == "tensor":
        from tensorboard.util import tensor_util

        arr = tensor_util.make_ndarray(value.tensor).reshape(-1)
        return float(arr[0]) if arr.size else None
    return None


def _tb_record(step: int, d: dict[str, float], n: int) -> Record:
    """The scalars of one step as a train Record (a val Record when only validation was logged)."""
    if "loss" not in d and "val_loss" in d:
        return Record("val", int(step), val_loss=d["val_loss"], line=n)
    return Record("train", int(step), d.get("loss"), d.get("lr"), d.get("grad_norm"),
                  d.get("loss_scale"), val_loss=d.get("val_loss"), line=n)
