"""Recognise training logs by content and stream them as one common record type.

Formats (``formats.FORMATS``; the name is ``Artifact.format``, the description ``Artifact.detail``):

- ``megatron``  Megatron-LM / Megatron-DeepSpeed text: ``iteration N/M | ... | lm loss: ... |``
  lines, ``validation loss at iteration N | lm loss value: ...``, ``saving checkpoint at
  iteration N``, plus the DeepSpeed lines interleaved with them (``OVERFLOW! ... reducing to``,
  ``step=N, skipped=K, lr=[...]``, ``steps: N loss: ...``);
- ``deepspeed`` the DeepSpeed lines alone; ``nanogpt`` ``iter N: loss X, time ...`` /
  ``step N: train loss X, val loss Y`` and modded-nanogpt ``step:N/M train_loss:X`` /
  ``val_loss:Y``; ``hf-stdout`` the dicts the HF Trainer (and axolotl) prints (``{'loss': 2.31, ...}``);
- ``litgpt`` litgpt / lit-gpt ``iter N step M: loss X, iter time: T ms`` (and the newer
  ``Epoch E | iter N step M | loss train: X``); ``torchtune`` its metric logger's
  ``Step N | loss:X lr:Y`` and its progress bar ``E|N|Loss: X``;
- ``trainer-state`` HF ``trainer_state.json`` (``log_history`` is decoded one entry at a time),
  ``jsonl`` metrics (LLaMA-Factory's ``trainer_log.jsonl`` too), ``csv`` metrics (W&B exports
  too: ``<run> - train/loss`` columns), ``tensorboard`` event files (needs the optional
  ``tensorboard`` package), ``text`` any other text log (only error lines are read).

Every reader yields ``Record`` objects (train / val / save / load / overflow / dsstep / error /
gap) and never holds more than one chunk of the file: text is read in 1 MiB chunks, lines longer
than ``MAX_LINE`` are cut (the rest of such a line is skipped, whatever its size), bytes that
are not UTF-8 are replaced. Nothing here interprets the numbers: see ``probes/logs/``.

The readers live beside this module: ``text`` (bounded line reading and the text-line
classifier), ``metrics`` (JSONL, CSV, trainer_state.json, TensorBoard) and ``record`` (``Record``
and the metric key vocabulary); ``formats`` ties each format to its sniffer and reader.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from ...errors import ArtifactError
from ...files import open_regular
from ...observations import Artifact
from . import formats
from .record import Record
from .text import encoding_of, iter_lines

__all__ = ["FOLDER", "FOLDER_DETAIL", "Record", "detect_format", "find_logs_in", "iter_records", "sniff"]

SNIFF_BYTES = 1 << 20      # how far into a text file the sniffer looks for a log line
LOG_SUFFIXES = (".log", ".out", ".err", ".txt", ".stdout", ".stderr")
FOLDER, FOLDER_DETAIL = "folder", "folder of logs"  # Artifact.format / detail of a folder holding logs


def _is_log_name(p: Path) -> bool:
    name = p.name.lower()
    return name.endswith(LOG_SUFFIXES) or "log" in name or name.startswith("slurm")


def detect_format(path: Path) -> str | None:
    """The name of the log format of ``path`` by content (see ``formats``), or None if not a log.

    Raises ArtifactError for binary content under a log-like name ("train.log" that is not text),
    and for anything that is not a regular file (a FIFO would block, /dev/zero never end).
    """
    with open_regular(path) as f:
        raw = f.read(65536)
    for fmt in formats.FORMATS:
        if fmt.magic and fmt.magic(raw, path):
            return fmt.name
    encoding = encoding_of(raw)
    if encoding == "utf-8" and looks_binary(raw[:8192]):
        if _is_log_name(path):
            raise ArtifactError(path, "binary content, not a text log")
        return None
    head = raw.decode(encoding, "replace").lstrip("\ufeff \t\r\n")
    for fmt in formats.FORMATS:
        if fmt.head and fmt.head(head, path):
            return fmt.name
    return _sniff_text(path, encoding)


_NUL_RUN = re.compile(rb"\x00{16,}")
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f\x7f]")


def looks_binary(raw: bytes) -> bool:
    """More than 5 % control bytes (not tab, newlines, form feed or ANSI escapes). Runs of NUL are
    left out first: a node that crashed mid-write leaves them in a text log, which stays readable."""
    text = _NUL_RUN.sub(b"", raw)
    return len(_CONTROL.findall(text)) > 0.05 * max(len(text), 1) if text else bool(raw)


def _sniff_text(path: Path, encoding: str) -> str | None:
    """Scan up to SNIFF_BYTES for a line only a training log prints; strongest format wins."""
    by_line = [f for f in formats.FORMATS if f.line]
    hits = dict.fromkeys((f.name for f in by_line), 0)
    hinted = None
    for _, line in iter_lines(path, encoding, max_bytes=SNIFF_BYTES):
        fmt = next((f for f in by_line if f.line(line)), None)
        if fmt is not None and fmt.decisive:
            return fmt.name
        if fmt is not None:
            hits[fmt.name] += 1
        elif hinted is None:
            hinted = next((f.name for f in by_line if f.hint and f.hint(line)), None)
        if sum(hits.values()) >= 20:
            break
    found = next((name for name, n in hits.items() if n), None) or hinted
    return found or ("text" if _is_log_name(path) else None)


def sniff(path: str | Path) -> Artifact | None:
    """A training log recognised by content (``detect`` calls this last), or None. A folder that
    is not a checkpoint but holds logs (a TensorBoard ``runs/`` tree, an output dir with
    ``checkpoint-N/trainer_state.json``) is a "folder of logs"."""
    p = Path(path)
    if p.is_dir():
        return Artifact(str(p), "log", FOLDER_DETAIL, FOLDER) if find_logs_in(p) else None
    if not p.is_file():
        return None
    name = detect_format(p)
    return Artifact(str(p), "log", formats.get(name).detail, name) if name else None


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
                       if d.is_dir() and (m := re.fullmatch(r"checkpoint-(\d{1,18})", d.name)))
        for _, d in reversed(ckpts):
            if os.access(d, os.R_OK | os.X_OK) and (d / "trainer_state.json").is_file():
                found.append(d / "trainer_state.json")
                break
    events = [p for depth in ("", "*/", "*/*/", "*/*/*/") for p in root.glob(f"{depth}events.out.tfevents*")]
    found.extend(sorted(events)[:20])
    found.extend(sorted(p for p in root.iterdir()  # a FIFO or device named x.log is listed to be reported
                        if p.suffix in (".log", ".out") and not p.is_dir()
                        and (not p.is_file() or p.stat().st_size > 0))[:10])
    return found


# ---------------------------------------------------------------------------------------------
# reading

def iter_records(path: str | Path, fmt: str | None = None) -> Iterator[Record]:
    """Stream the records of one log. ``fmt`` is a format name (detected when None)."""
    p = Path(path)
    fmt = fmt or detect_format(p)
    if fmt is None:
        raise ArtifactError(p, "not a training log (no loss, iteration or step lines recognised)")
    return formats.get(fmt).reader(p)
