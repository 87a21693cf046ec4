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
"""
from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from ..errors import ArtifactError
from ..observations import Artifact

CHUNK = 1 << 20            # bytes read at a time
MAX_LINE = 1 << 16         # characters of one line that are parsed; the rest is skipped
SNIFF_BYTES = 1 << 20      # how far into a text file the sniffer looks for a log line
MAX_JSON_HEAD = 8 << 20    # trainer_state.json: bytes before "log_history" / after it
LOG_SUFFIXES = (".log", ".out", ".err", ".txt", ".stdout", ".stderr")

DETAILS = {"megatron": "megatron text log", "deepspeed": "deepspeed text log",
           "nanogpt": "nanogpt text log", "hf-stdout": "hf trainer stdout",
           "trainer-state": "hf trainer_state.json", "jsonl": "jsonl metrics",
           "csv": "csv metrics", "tensorboard": "tensorboard events", "text": "plain text log"}
FOLDER_DETAIL = "folder of logs"


@dataclass(slots=True)
class Record:
    """One event of a log. ``line`` is the 1-based line (text) or entry number (JSON/CSV/TB)."""

    kind: str                  # train | val | save | load | overflow | dsstep | error | gap | meta | phase
    iteration: int | None = None
    loss: float | None = None
    lr: float | None = None
    grad_norm: float | None = None
    loss_scale: float | None = None
    skipped: int | None = None     # train: skipped in this interval; dsstep: cumulative
    nan_count: int | None = None
    val_loss: float | None = None
    seconds: float | None = None   # time per iteration
    batch: float | None = None     # global batch size (to normalise the time)
    line: int = 0
    text: str = ""


# ---------------------------------------------------------------------------------------------
# line patterns

MEG_FAST = re.compile(  # the common Megatron layout in one match; other layouts use _meg_fields
    r"iteration\s+(\d+)/\s*\d+ \|.*? elapsed time per iteration \((ms|s)\): ([^ |]+) \|"
    r" learning rate: ([^ |]+) \| global batch size:\s+(\d+) \| lm loss: ([^ |]+) \|"
    r"(?: loss scale: ([^ |]+) \|)?(?: grad norm: ([^ |]+) \|)?.*? number of skipped iterations:"
    r"\s+(\d+) \| number of nan iterations:\s+(\d+) \|")
MEG_ITER = re.compile(r"(?<![\w-])iteration\s+(\d+)\s*/\s*(\d+)\s*\|")
MEG_VAL = re.compile(r"validation loss at (?:iteration\s+(\d+)|the end of training)[^|]*\|(.*)")
SAVE = re.compile(r"sav(?:ing|ed) checkpoint (?:at|from) iteration\s+(\d+)")
LOAD = re.compile(r"load(?:ing|ed) checkpoint from .*? at iteration\s+(\d+)")
SAVE_PATH = re.compile(r"[Ss]aving (?:model )?checkpoint:? (?:to )?(\S+)")
STEP_IN_PATH = re.compile(r"(?:global_step|checkpoint-|iter_)0*(\d+)")
OVERFLOW = re.compile(r"(?:OVERFLOW!|[Oo]verflow detected|Gradient overflow|[Gg]rad overflow)"
                      r".*?(?:loss scale: ?([\d.eE+-]+), reducing to ([\d.eE+-]+)"
                      r"|reducing loss scale to ([\d.eE+-]+)|on iteration (\d+))")
REDUCE = re.compile(r"Reducing dynamic loss scale from ([\d.eE+-]+) to ([\d.eE+-]+)")
DS_STEP = re.compile(r"\bstep=(\d+), skipped=(\d+), lr=\[([^\],]+)")
DS_LOSS = re.compile(r"\bsteps: (\d+) loss: ([-+\w.]+)")
NANO_ITER = re.compile(r"\biter (\d+): loss ([-+\w.]+)(?:, time ([\d.]+)ms)?")
NANO_EVAL = re.compile(r"\bstep (\d+): train loss ([-+\w.]+), val loss ([-+\w.]+)")
MODDED = re.compile(r"\bstep:(\d+)/\d+ (train_loss|val_loss):([-+\w.]+)")
HF_DICT = re.compile(r"\{'(?:loss|eval_loss|train_runtime|grad_norm|learning_rate)'[^{}]*\}")
HF_PAIR = re.compile(r"'([\w/.-]+)': ([^,}]+)")
TQDM = re.compile(r"\|\s*(\d+)/(\d+) \[")
ERRORS = re.compile(r"rror|Traceback|NCCL|out of memory|CANCELLED|Xid|No space left|quota"
                    r"|fallen off the bus|Stale file|Killed|Exception")
GAP_MARKERS = ("[...]", "...", "\u2026", "[\u2026]", "[ ... ]")
WEAK_MEGATRON = ("using world size:", "------------------------ arguments ------------------------",
                 "> building train, validation, and test datasets", "[before the start of training step]")


def _num(text: str | None) -> float | None:
    """float() that also reads 'nan' / 'inf' and never raises."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        t = text.strip().strip("'\"").lower()
        if t in ("nan", "-nan", "inf", "-inf", "infinity", "-infinity"):
            return float(t.replace("infinity", "inf"))
        return None


def _int(text: str | None) -> int | None:
    v = _num(text)
    return int(v) if v is not None and math.isfinite(v) else None


# ---------------------------------------------------------------------------------------------
# reading text in bounded chunks

def iter_lines(path: Path, encoding: str = "utf-8", max_bytes: int | None = None) -> Iterator[tuple[int, str]]:
    """Yield (line number, text) with bounded memory: at most CHUNK + MAX_LINE bytes are held.

    A line longer than MAX_LINE yields its first MAX_LINE characters once; the rest of it is
    read and dropped. A partial last line (no newline) is yielded as it is. ``max_bytes`` stops
    reading after that many bytes (the sniffer's budget, whatever the line lengths).
    """
    if encoding != "utf-8":
        yield from _iter_lines_decoded(path, encoding, max_bytes)
        return
    lineno, carry, skipping, read = 0, b"", False, 0
    with open(path, "rb") as f:
        while max_bytes is None or read < max_bytes:
            chunk = f.read(CHUNK)
            if not chunk:
                break
            read += len(chunk)
            buf = carry + chunk if carry else chunk
            cut = buf.rfind(b"\n")
            if cut < 0:
                carry = buf
            else:
                carry = buf[cut + 1:]
                lines = buf[:cut].decode("utf-8", "replace").split("\n")
                if skipping:
                    lines[0] = None  # tail of an overlong line already yielded
                    skipping = False
                for line in lines:
                    if line is None:
                        continue
                    lineno += 1
                    yield lineno, line if len(line) <= MAX_LINE else line[:MAX_LINE]
            if len(carry) > MAX_LINE:
                if not skipping:
                    lineno += 1
                    yield lineno, carry[:MAX_LINE].decode("utf-8", "replace")
                    skipping = True
                carry = b""
        if carry and not skipping:
            yield lineno + 1, carry.decode("utf-8", "replace")


def _iter_lines_decoded(path: Path, encoding: str, max_bytes: int | None) -> Iterator[tuple[int, str]]:
    """UTF-16 logs (PowerShell redirection): same contract through a decoding reader."""
    with open(path, encoding=encoding, errors="replace", newline=None) as f:
        lineno, skipping, read = 0, False, 0
        while max_bytes is None or read < max_bytes:
            line = f.readline(MAX_LINE)
            if not line:
                return
            read += 2 * len(line)
            complete = line.endswith("\n")
            if not skipping:
                lineno += 1
                yield lineno, line.rstrip("\n")
            skipping = not complete


def _encoding(head: bytes) -> str:
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
    text = head.decode(encoding, "replace") if encoding == "utf-8" else head.decode("utf-16", "replace")
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
    sep = "\t" if first.count("\t") > first.count(",") else ","
    cols = [c.strip().strip('"') for c in first.split(sep)]
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
# dict-shaped formats share one key vocabulary

_SLOTS = {
    "step": "step", "global_step": "step", "iteration": "step", "iter": "step", "_step": "step",
    "it": "step", "trainer/global_step": "step", "train/global_step": "step", "steps": "step",
    "loss": "loss", "train_loss": "loss", "train/loss": "loss", "lm_loss": "loss",
    "training_loss": "loss", "train/lm_loss": "loss", "loss/train": "loss", "train/loss_step": "loss",
    "eval_loss": "val_loss", "val_loss": "val_loss", "validation_loss": "val_loss",
    "eval/loss": "val_loss", "val/loss": "val_loss", "valid_loss": "val_loss",
    "loss/val": "val_loss", "lm_loss_validation": "val_loss", "valid/loss": "val_loss",
    "lr": "lr", "learning_rate": "lr", "train/lr": "lr", "train/learning_rate": "lr",
    "grad_norm": "grad_norm", "gradient_norm": "grad_norm", "train/grad_norm": "grad_norm",
    "total_norm": "grad_norm", "gnorm": "grad_norm", "grad_norm/total": "grad_norm",
    "loss_scale": "loss_scale", "train/loss_scale": "loss_scale", "grad_scale": "loss_scale",
    "skipped_iterations": "skipped", "number_of_skipped_iterations": "skipped",
    "nan_iterations": "nan_count", "number_of_nan_iterations": "nan_count",
}


def metric_slot(key: str) -> str | None:
    """'train/learning_rate' -> 'lr', 'lm loss' -> 'loss', 'eval_loss' -> 'val_loss', else None."""
    k = key.strip().lower().replace(" ", "_").replace("-", "_")
    return _SLOTS.get(k)


def record_from_dict(d: dict, line: int, counter: int) -> Record | None:
    """A train or val Record from one metrics dict; None when it holds neither loss."""
    vals: dict[str, object] = {}
    for k, v in d.items():
        slot = metric_slot(str(k))
        if slot and slot not in vals:
            vals[slot] = v
    if "train_runtime" in d or ("loss" not in vals and "val_loss" not in vals):
        return None  # end-of-training summaries repeat an average loss
    step = _int(str(vals["step"])) if "step" in vals else counter

    def f(slot: str) -> float | None:
        v = vals.get(slot)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        return _num(v) if isinstance(v, str) else None

    if "loss" not in vals:
        return Record("val", step, val_loss=f("val_loss"), line=line)
    skipped, nan_count = f("skipped"), f("nan_count")
    return Record("train", step, f("loss"), f("lr"), f("grad_norm"), f("loss_scale"),
                  int(skipped) if skipped is not None and math.isfinite(skipped) else None,
                  int(nan_count) if nan_count is not None and math.isfinite(nan_count) else None,
                  f("val_loss"), line=line)


# ---------------------------------------------------------------------------------------------
# readers

def iter_records(path: str | Path, fmt: str | None = None) -> Iterator[Record]:
    """Stream the records of one log. ``fmt`` from ``detect_format`` (detected when None)."""
    p = Path(path)
    fmt = fmt or detect_format(p)
    if fmt is None:
        raise ArtifactError(p, "not a training log (no loss, iteration or step lines recognised)")
    if fmt == "trainer-state":
        return _trainer_state_records(p)
    if fmt == "jsonl":
        return _jsonl_records(p)
    if fmt == "csv":
        return _csv_records(p)
    if fmt == "tensorboard":
        return _tensorboard_records(p)
    with open(p, "rb") as f:
        encoding = _encoding(f.read(2))
    return _text_records(p, encoding)


def _meg_fields(line: str, start: int) -> dict[str, str]:
    out = {}
    for part in line[start:].split("|"):
        k, sep, v = part.partition(":")
        if sep:
            out[k.strip()] = v
    return out


def _megatron_record(line: str, lineno: int) -> Record | None:
    m = MEG_FAST.search(line) if len(line) < 4096 else None
    if m:
        it, unit, secs, lr, gbs, loss, ls, gn, sk, nan = m.groups()
        try:  # the common case; odd values ('nan', '-') take the careful path below
            s = float(secs)
            return Record("train", int(it), float(loss), float(lr), None if gn is None else float(gn),
                          None if ls is None else float(ls), int(sk), int(nan), None,
                          s / 1000.0 if unit == "ms" else s, float(gbs), lineno)
        except ValueError:
            s = _num(secs)
            return Record("train", int(it), _num(loss), _num(lr), _num(gn), _num(ls), int(sk), int(nan),
                          None, s / 1000.0 if s is not None and unit == "ms" else s, float(gbs), lineno)
    m = MEG_ITER.search(line)
    if not m:
        return None
    fields = _meg_fields(line, m.end())
    loss = next((fields[k] for k in ("lm loss", "loss", "lm-loss") if k in fields),
                next((v for k, v in fields.items() if k.endswith("loss") and "scale" not in k), None))
    secs = _num(fields.get("elapsed time per iteration (ms)"))
    secs = secs / 1000.0 if secs is not None else _num(fields.get("elapsed time per iteration (s)"))
    return Record("train", int(m.group(1)), _num(loss), _num(fields.get("learning rate")),
                  _num(fields.get("grad norm")), _num(fields.get("loss scale")),
                  _int(fields.get("number of skipped iterations")),
                  _int(fields.get("number of nan iterations")), None, secs,
                  _num(fields.get("global batch size")), lineno)


def _text_records(path: Path, encoding: str) -> Iterator[Record]:
    """All text formats through one line classifier, so mixed logs (Megatron + DeepSpeed) work.

    DeepSpeed ``steps: N loss: X`` lines duplicate Megatron's iteration lines in Megatron-DeepSpeed
    logs: they are held back one line and dropped once a Megatron line is seen.
    """
    pending: Record | None = None   # a DeepSpeed 'steps:' record not yet known to be a duplicate
    megatron = False
    last_it: int | None = None
    last_eval: int | None = None
    tqdm_step: int | None = None
    counter = 0
    for lineno, line in iter_lines(path, encoding):
        rec: Record | None = None
        if "iteration" in line:
            if "validation loss at" in line:
                m = MEG_VAL.search(line)
                if m:
                    fields = _meg_fields(m.group(2), 0)
                    val = next((v for k, v in fields.items() if k.endswith("loss value")), None)
                    it = int(m.group(1)) if m.group(1) else last_it
                    rec = Record("val", it, val_loss=_num(val), line=lineno)
            elif "checkpoint" in line:
                m = SAVE.search(line) or LOAD.search(line)
                if m:
                    rec = Record("save" if "sav" in m.group(0) else "load", int(m.group(1)), line=lineno)
            else:
                rec = _megatron_record(line, lineno)
                if rec is not None:
                    megatron = True
                    if pending is not None and pending.iteration == rec.iteration:
                        pending = None
                    last_it = rec.iteration
        if rec is None and "loss" in line:
            m = NANO_ITER.search(line) or DS_LOSS.search(line)
            if m:
                if m.re is DS_LOSS:
                    if not megatron:
                        if pending is not None:
                            yield pending
                        pending = Record("train", int(m.group(1)), _num(m.group(2)), line=lineno)
                    continue
                t = _num(m.group(3))
                rec = Record("train", int(m.group(1)), _num(m.group(2)), seconds=t / 1000 if t else None,
                             line=lineno)
            elif (m := MODDED.search(line)) is not None:
                kind = "train" if m.group(2) == "train_loss" else "val"
                v = _num(m.group(3))
                rec = Record(kind, int(m.group(1)), v if kind == "train" else None,
                             val_loss=v if kind == "val" else None, line=lineno)
            elif (m := NANO_EVAL.search(line)) is not None:
                last_eval = int(m.group(1))
                rec = Record("val", last_eval, val_loss=_num(m.group(3)), line=lineno)
            elif "{'" in line and (m := HF_DICT.search(line)) is not None:
                if (t := TQDM.findall(line[:m.start()])):
                    tqdm_step = int(t[-1][0])
                d = dict(HF_PAIR.findall(m.group(0)))
                counter += "loss" in d  # the printed dicts carry no step: count the train ones
                rec = record_from_dict(d, lineno, tqdm_step or counter)
            elif "scale" in line:
                rec = _overflow(line, lineno)
        elif rec is None and ("verflow" in line or "loss scale" in line):
            rec = _overflow(line, lineno)
        if rec is None and "step=" in line and (m := DS_STEP.search(line)) is not None:
            rec = Record("dsstep", int(m.group(1)), lr=_num(m.group(3)), skipped=int(m.group(2)), line=lineno)
        if rec is None and "aving" in line and (m := SAVE_PATH.search(line)) is not None:
            s = STEP_IN_PATH.search(m.group(1))
            it = int(s.group(1)) if s else (last_eval if last_eval is not None else last_it)
            if it is not None:
                rec = Record("save", it, line=lineno)
        if rec is None:
            if ERRORS.search(line):
                rec = Record("error", last_it, line=lineno, text=line.strip()[:500])
            elif line.strip() in GAP_MARKERS:
                rec = Record("gap", last_it, line=lineno)
            elif "valuat" in line and ("Running" in line or "***" in line or "valuating" in line):
                rec = Record("phase", last_it, line=lineno, text="eval")
        if rec is None:
            if "|" in line and "/" in line and tqdm_step is not None and (t := TQDM.findall(line)):
                tqdm_step = int(t[-1][0])
            continue
        if rec.kind == "train":
            last_it = rec.iteration
            if pending is not None:
                yield pending
                pending = None
        yield rec
    if pending is not None:
        yield pending


def _overflow(line: str, lineno: int) -> Record | None:
    m = OVERFLOW.search(line)
    if m:
        attempted, reduced, reduced2, it = m.groups()
        return Record("overflow", _int(it), loss_scale=_num(reduced or reduced2), line=lineno,
                      text="overflow")
    m = REDUCE.search(line)
    if m:  # DeepSpeed's fused optimizer prints this beside (or instead of) the overflow line
        return Record("overflow", None, loss_scale=_num(m.group(2)), line=lineno, text="reduce")
    return None


def _jsonl_records(path: Path) -> Iterator[Record]:
    counter = 0
    for lineno, line in iter_lines(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            yield Record("error", None, line=lineno, text="unparseable JSON line")
            continue
        if isinstance(obj, dict):
            counter += 1
            rec = record_from_dict(obj, lineno, counter)
            if rec is not None:
                yield rec


def _csv_records(path: Path) -> Iterator[Record]:
    lines = iter_lines(path)
    try:
        _, header = next(lines)
    except StopIteration:
        return
    sep = "\t" if header.count("\t") > header.count(",") else ","
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


def _trainer_state_records(path: Path) -> Iterator[Record]:
    """Decode ``log_history`` one entry at a time; also yields the state's own save points.

    The top-level keys other than ``log_history`` are small; they are parsed from the bytes around
    the list. Records carry ``line`` = entry index + 1.
    """
    decoder = json.JSONDecoder()
    with open(path, "r", encoding="utf-8", errors="replace") as f:
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
        head = buf[:start].rstrip().rstrip(",") + "}"
        pos = buf.index("[", start) + 1
        index = 0
        while True:
            while True:  # skip separators, refilling the buffer as needed
                while pos < len(buf) and buf[pos] in " \t\r\n,":
                    pos += 1
                if pos < len(buf):
                    break
                more = f.read(CHUNK)
                if not more:
                    raise ArtifactError(path, f"truncated trainer_state.json after {index} log entries")
                buf, pos = buf[pos:] + more, 0
            if buf[pos] == "]":
                break
            while True:
                try:
                    obj, end = decoder.raw_decode(buf, pos)
                    break
                except ValueError:
                    more = f.read(CHUNK)
                    if not more:
                        raise ArtifactError(path, f"truncated trainer_state.json after {index} log entries") from None
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
    meta: dict = {}
    for text in (head, "{" + tail.lstrip().lstrip(",")):
        try:
            part = json.loads(text)
            meta.update(part if isinstance(part, dict) else {})
        except ValueError:
            pass
    save_steps, global_step = meta.get("save_steps"), meta.get("global_step")
    if isinstance(save_steps, int) and save_steps > 0:
        yield Record("meta", save_steps, line=0, text="save_steps")
    if isinstance(global_step, int) and (m := re.fullmatch(r"checkpoint-(\d+)", path.parent.name)):
        yield Record("save", int(m.group(1)), line=0, text=f"folder {path.parent.name}")


TB_TAGS = {"lm loss": "loss", "lm-loss-training/lm loss": "loss", "learning-rate": "lr",
           "learning-rate/learning-rate": "lr", "grad-norm": "grad_norm", "grad-norm/grad-norm": "grad_norm",
           "loss-scale": "loss_scale", "loss-scale/loss-scale": "loss_scale",
           "lm loss validation": "val_loss", "lm-loss-validation/lm loss validation": "val_loss"}


def _tensorboard_records(path: Path) -> Iterator[Record]:
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
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind == "tensor":
        from tensorboard.util import tensor_util

        arr = tensor_util.make_ndarray(value.tensor).reshape(-1)
        return float(arr[0]) if arr.size else None
    return None


def _tb_record(step: int, d: dict[str, float], n: int) -> Record:
    if "loss" not in d and "val_loss" in d:
        return Record("val", int(step), val_loss=d["val_loss"], line=n)
    return Record("train", int(step), d.get("loss"), d.get("lr"), d.get("grad_norm"),
                  d.get("loss_scale"), val_loss=d.get("val_loss"), line=n)
