"""Recognise training logs by content and stream them as one common record type.

Formats (``detect_format`` names / ``Artifact.detail``):

- ``megatron``  Megatron-LM / Megatron-DeepSpeed text: ``iteration N/M | ... | lm loss: ... |``
  lines, ``validation loss at iteration N | lm loss value: ...``, ``saving checkpoint at
  iteration N``, plus the DeepSpeed lines interleaved with them (``OVERFLOW! ... reducing to``,
  ``step=N, skipped=K, lr=[...]``, ``steps: N loss: ...``);
- ``deepspeed`` the DeepSpeed lines alone; ``nanogpt`` ``iter N: loss X, time ...`` /
  ``step N: train loss X, val loss Y`` and modded-nanogpt ``step:N/M train_loss:X`` /
  ``val_loss:Y``; ``hf-stdout`` the dicts the HF Trainer prints (``{'loss': 2.31, ...}``);
- ``trainer-state`` HF ``trainer_state.json`` (``log_history`` is decoded one entry at a time),
  ``jsonl`` metrics, ``csv`` metrics, ``tensorboard`` event files (needs the optional
  ``tensorboard`` package), ``text`` any other text log (only error lines are read).

Every reader yields ``Record`` objects (train / val / save / load / overflow / dsstep / error /
gap) and never holds more than one chunk of the file: text is read in 1 MiB chunks, lines longer
than ``MAX_LINE`` are cut (the rest of such a line is skipped, whatever its size), bytes that
are not UTF-8 are replaced. Nothing here interprets the numbers: see ``probes/logs.py``.

This module sniffs and dispatches; the readers live beside it: ``logs_text`` (bounded line
reading and the text-line classifier), ``logs_metrics`` (JSONL, CSV, trainer_state.json,
TensorBoard) and ``logs_record`` (``Record`` and the metric key vocabulary).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable, Iterator

from ..errors import ArtifactError
from ..observations import Artifact
from .logs_metrics import csv_records, csv_separator, jsonl_records, tensorboard_records, trainer_state_records
from .logs_record import Record, metric_slot
from .logs_text import (DS_LOSS, DS_STEP, HF_DICT, MEG_ITER, MODDED, NANO_EVAL, NANO_ITER, OVERFLOW,
                        iter_lines, text_records)

SNIFF_BYTES = 1 << 20      # how far into a text file the sniffer looks for a log line
LOG_SUFFIXES = (".log", ".out", ".err", ".txt", ".stdout", ".stderr")

DETAILS = {"megatron": "megatron text log", "deepspeed": "deepspeed text log",
           "nanogpt": "nanogpt text log", "hf-stdout": "hf trainer stdout",
           "trainer-state": "hf trainer_state.json", "jsonl": "jsonl metrics",
           "csv": "csv metrics", "tensorboard": "tensorboard events", "text": "plain text log"}
FOLDER_DETAIL = "folder of logs"
WEAK_MEGATRON = ("using world size:", "------------------------ arguments ------------------------",
                 "> building train, validation, and test datasets", "[before the start of training step]")


def _encoding(head: bytes) -> str:
    """UTF-16 when the file starts with its byte-order mark, else UTF-8."""
    return "utf-16" if head[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8"


# ---------------------------------------------------------------------------------------------
# sniffing

def _is_log_name(p: Path) -> bool:
    name = p.name.lower()
    return name.endswith(LOG_SUFFIXES) or "log" in name or name.startswith("slurm")


def _loss_key(keys: Iterable[str]) -> bool:
    return any(metric_slot(k) in ("loss", "val_loss") for k in keys)


def detect_format(path: Path) -> str | None:
    """The log format of ``path`` by content (see module docstring), or None if not a log.

    Raises ArtifactError for binary content under a log-like name ("train.log" that is not text).
    """
    with open(path, "rb") as f:
        head = f.read(65536)
    if b"brain.Event" in head[:512] or (path.name.startswith("events.out.tfevents") and head):
        return "tensorboard"
    encoding = _encoding(head)
    if encoding == "utf-8" and b"\x00" in head[:8192]:
        if _is_log_name(path):
            raise ArtifactError(path, "binary content, not a text log")
        return None
    text = head.decode(encoding, "replace")
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped.startswith("{"):
        if '"log_history"' in text:
            return "trainer-state"
        if _sniff_jsonl(stripped):
            return "jsonl"
    first = stripped.split("\n", 1)[0]
    if ("," in first or "\t" in first) and _sniff_csv(first):
        return "csv"
    return _sniff_text(path, encoding)


def _sniff_jsonl(text: str) -> bool:
    """JSON objects one per line with a loss-like key (a data batch has input_ids/text instead)."""
    seen = 0
    for line in text.split("\n")[:50]:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue  # the sniffed head may end mid-line
        seen += 1
        if isinstance(obj, dict) and _loss_key(obj) and not ({"input_ids", "text", "messages"} & set(obj)):
            return True
        if seen >= 20:
            break
    return False


def _sniff_csv(first: str) -> bool:
    """A header row with a loss-like column."""
    cols = [c.strip().strip('"') for c in first.split(csv_separator(first))]
    return _loss_key(cols)


def _sniff_text(path: Path, encoding: str) -> str | None:
    """Scan up to SNIFF_BYTES for a line only a training log prints; strongest format wins."""
    hits = {"megatron": 0, "nanogpt": 0, "hf-stdout": 0, "deepspeed": 0}
    weak = False
    for _, line in iter_lines(path, encoding, max_bytes=SNIFF_BYTES):
        if "iteration" in line and MEG_ITER.search(line):
            return "megatron"
        if NANO_ITER.search(line) or NANO_EVAL.search(line) or MODDED.search(line):
            hits["nanogpt"] += 1
        elif "{'" in line and HF_DICT.search(line):
            hits["hf-stdout"] += 1
        elif DS_STEP.search(line) or DS_LOSS.search(line) or OVERFLOW.search(line):
            hits["deepspeed"] += 1
        elif not weak and any(m in line for m in WEAK_MEGATRON):
            weak = True
        if sum(hits.values()) >= 20:
            break
    for fmt in ("nanogpt", "hf-stdout", "deepspeed"):
        if hits[fmt]:
            return fmt
    if weak:
        return "megatron"
    return "text" if _is_log_name(path) else None


def sniff(path: str | Path) -> Artifact | None:
    """A training log recognised by content (``detect`` calls this last), or None. A folder that
    is not a checkpoint but holds logs (a TensorBoard ``runs/`` tree, an output dir with
    ``checkpoint-N/trainer_state.json``) is a "folder of logs"."""
    p = Path(path)
    if p.is_dir():
        return Artifact(str(p), "log", FOLDER_DETAIL) if find_logs_in(p) else None
    if not p.is_file():
        return None
    fmt = detect_format(p)
    return Artifact(str(p), "log", DETAILS[fmt]) if fmt else None


def find_logs_in(folder: str | Path) -> list[Path]:
    """Logs kept inside a run or checkpoint folder, cheaply (names and sizes only).

    The ``trainer_state.json`` of the folder itself, else the one in its highest ``checkpoint-N/``
    (it holds the whole history so far); TensorBoard event files up to three levels down; and
    top-level ``*.log`` / ``*.out`` files.
    """
    root = Path(folder)
    if not root.is_dir():
        return []
    found: list[Path] = []
    own = root / "trainer_state.json"
    if own.is_file():
        found.append(own)
    else:
        ckpts = sorted((int(m.group(1)), d) for d in root.iterdir()
                       if d.is_dir() and (m := re.fullmatch(r"checkpoint-(\d+)", d.name)))
        for _, d in reversed(ckpts):
            if (d / "trainer_state.json").is_file():
                found.append(d / "trainer_state.json")
                break
    events = [p for depth in ("", "*/", "*/*/", "*/*/*/") for p in root.glob(f"{depth}events.out.tfevents*")]
    found.extend(sorted(events)[:20])
    found.extend(sorted(p for p in root.iterdir()
                        if p.is_file() and p.suffix in (".log", ".out") and p.stat().st_size > 0)[:10])
    return found


# ---------------------------------------------------------------------------------------------
# reading

READERS = {"trainer-state": trainer_state_records, "jsonl": jsonl_records, "csv": csv_records,
           "tensorboard": tensorboard_records}


def iter_records(path: str | Path, fmt: str | None = None) -> Iterator[Record]:
    """Stream the records of one log. ``fmt`` from ``detect_format`` (detected when None)."""
    p = Path(path)
    fmt = fmt or detect_format(p)
    if fmt is None:
        raise ArtifactError(p, "not a training log (no loss, iteration or step lines recognised)")
    if fmt in READERS:
        return READERS[fmt](p)
    with open(p, "rb") as f:
        encoding = _encoding(f.read(2))
    return text_records(p, encoding)
