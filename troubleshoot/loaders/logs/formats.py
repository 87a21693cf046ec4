"""The one table of training-log formats: how each is recognised, read and described.

A format is recognised in one of three ways:

- ``magic(raw, path)``: from the first 64 KiB of raw bytes, for binary files (TensorBoard events);
- ``head(text, path)``: from the first 64 KiB of the file (decoded), for structured files
  (trainer_state.json, JSONL, CSV); tried in table order before any line is classified;
- ``line(text)``: a line only this format prints, for text logs. The sniffer reads up to
  ``SNIFF_BYTES`` of lines; a ``decisive`` format wins at its first line, the others count hits
  and the first format in table order with a hit wins; ``hint`` lines (start-up banners) only
  count when no format printed a line of its own.

``text`` is the catch-all for a file named like a log in which no format was recognised (only its error
lines are read). ``register`` adds a format (see docs/extending.md); it goes before the
catch-all so that it is tried.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .metrics import csv_records, csv_separator, jsonl_records, tensorboard_records, trainer_state_records
from .record import Record, metric_slot
from .text import (
    DS_LOSS,
    DS_STEP,
    HF_DICT,
    LITGPT,
    MEG_ITER,
    MODDED,
    NANO_EVAL,
    NANO_ITER,
    TORCHTUNE,
    TORCHTUNE_BAR,
    encoding_of,
    overflow_search,
    text_records,
)

WEAK_MEGATRON = ("using world size:", "------------------------ arguments ------------------------",
                 "> building train, validation, and test datasets", "[before the start of training step]")


@dataclass(frozen=True)
class LogFormat:
    name: str                                   # machine-readable: Artifact.format, Summary.fmt
    detail: str                                 # human-readable: Artifact.detail, the summary finding
    reader: Callable[[Path], Iterator[Record]]  # streams the file's records in bounded memory
    magic: Callable[[bytes, Path], bool] | None = None
    head: Callable[[str, Path], bool] | None = None
    line: Callable[[str], bool] | None = None
    decisive: bool = False      # one such line settles it (nothing else prints it)
    hint: Callable[[str], bool] | None = None
    per_batch: bool = False     # the logged loss is one batch's, whatever the logging interval
    error_lines: bool = False   # free text: OOM, NCCL and CUDA error lines are read too


def read_text(path: Path) -> Iterator[Record]:
    """Records of any text log: one classifier reads every text format (mixed logs in one pass)."""
    with open(path, "rb") as f:
        encoding = encoding_of(f.read(2))
    return text_records(path, encoding)


def loss_key(keys: Iterable[str]) -> bool:
    return any(metric_slot(k) in ("loss", "val_loss") for k in keys)


def _trainer_state(head: str, path: Path) -> bool:
    return head.startswith("{") and '"log_history"' in head


def _jsonl(head: str, path: Path) -> bool:
    """JSON objects one per line with a loss-like key (a data batch has input_ids/text instead)."""
    if not head.startswith("{"):
        return False
    return any(isinstance(obj, dict) and loss_key(obj) and not ({"input_ids", "text", "messages"} & set(obj))
               for obj in _head_objects(head, path))


def _head_objects(head: str, path: Path) -> Iterator[object]:
    """The first 20 JSON values of the head's lines (CR-only line ends too); when the head is one
    unfinished line, the first records of the file read to their ends (as the batch sniffer does)."""
    lines = head.splitlines()
    if len(lines) == 1 and path.suffix.lower() in (".jsonl", ".ndjson"):
        from ..batch.records import head_records

        yield from head_records(path)
        return
    seen = 0
    for line in lines[:50]:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue  # the sniffed head may end mid-line
        seen += 1
        yield obj
        if seen >= 20:
            return


def _csv(head: str, path: Path) -> bool:
    """A header row with a loss-like column."""
    first = head.split("\n", 1)[0]
    if "," not in first and "\t" not in first:
        return False
    return loss_key(c.strip().strip('"') for c in first.split(csv_separator(first)))


FORMATS: list[LogFormat] = [
    LogFormat("tensorboard", "tensorboard events", tensorboard_records, magic=lambda raw, path: (
        b"brain.Event" in raw[:512] or (path.name.startswith("events.out.tfevents") and bool(raw)))),
    LogFormat("trainer-state", "hf trainer_state.json", trainer_state_records, head=_trainer_state),
    LogFormat("jsonl", "jsonl metrics", jsonl_records, head=_jsonl),
    LogFormat("csv", "csv metrics", csv_records, head=_csv),
    LogFormat("megatron", "megatron text log", read_text, decisive=True, error_lines=True,
              line=lambda s: "iteration" in s and MEG_ITER.search(s) is not None,
              hint=lambda s: any(m in s for m in WEAK_MEGATRON)),
    LogFormat("litgpt", "litgpt text log", read_text, per_batch=True, error_lines=True, decisive=True,
              line=lambda s: "iter" in s and LITGPT.search(s) is not None),
    LogFormat("torchtune", "torchtune log", read_text, per_batch=True, error_lines=True,
              line=lambda s: bool(TORCHTUNE.search(s) or TORCHTUNE_BAR.search(s))),
    LogFormat("nanogpt", "nanogpt text log", read_text, per_batch=True, error_lines=True,
              line=lambda s: bool(NANO_ITER.search(s) or NANO_EVAL.search(s) or MODDED.search(s))),
    LogFormat("hf-stdout", "hf trainer stdout", read_text, error_lines=True,
              line=lambda s: "{'" in s and HF_DICT.search(s) is not None),
    LogFormat("deepspeed", "deepspeed text log", read_text, error_lines=True,
              line=lambda s: bool(DS_STEP.search(s) or DS_LOSS.search(s) or overflow_search(s))),
    LogFormat("text", "plain text log", read_text, error_lines=True),  # the catch-all: keep it last
]


def get(name: str) -> LogFormat:
    """The format called ``name``; KeyError for a name no loader gave."""
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise KeyError(name)


def register(fmt: LogFormat) -> None:
    """Add a format (or replace one of the same name), tried before the ``text`` catch-all."""
    FORMATS[:] = [f for f in FORMATS if f.name != fmt.name]
    FORMATS.insert(len(FORMATS) - 1, fmt)
