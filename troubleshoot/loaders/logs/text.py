"""Text logs: reading lines in bounded memory, and the one classifier that turns them into Records.

Megatron, DeepSpeed, nanoGPT and HF-stdout lines all go through ``text_records``, so mixed logs
(Megatron-DeepSpeed prints both families' lines) read in one pass. The line patterns are shared
with the sniffers of ``formats``.

Text is read in ``CHUNK`` bytes; a line longer than ``MAX_LINE`` is cut and the rest of it skipped,
whatever its size; bytes that are not UTF-8 are replaced.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterator

from .record import Record, record_from_dict, to_float, to_int

CHUNK = 1 << 20            # bytes read at a time
MAX_LINE = 1 << 16         # characters of one line that are parsed; the rest is skipped


# ---------------------------------------------------------------------------------------------
# reading text in bounded chunks

def encoding_of(head: bytes) -> str:
    """UTF-16 when the file starts with its byte-order mark, else UTF-8."""
    return "utf-16" if head[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8"


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


# ---------------------------------------------------------------------------------------------
# the line classifier

def text_records(path: Path, encoding: str) -> Iterator[Record]:
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
                    rec = Record("val", it, val_loss=to_float(val), line=lineno)
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
                        pending = Record("train", int(m.group(1)), to_float(m.group(2)), line=lineno)
                    continue
                t = to_float(m.group(3))
                rec = Record("train", int(m.group(1)), to_float(m.group(2)), seconds=t / 1000 if t else None,
                             line=lineno)
            elif (m := MODDED.search(line)) is not None:
                kind = "train" if m.group(2) == "train_loss" else "val"
                v = to_float(m.group(3))
                rec = Record(kind, int(m.group(1)), v if kind == "train" else None,
                             val_loss=v if kind == "val" else None, line=lineno)
            elif (m := NANO_EVAL.search(line)) is not None:
                last_eval = int(m.group(1))
                rec = Record("val", last_eval, val_loss=to_float(m.group(3)), line=lineno)
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
            rec = Record("dsstep", int(m.group(1)), lr=to_float(m.group(3)), skipped=int(m.group(2)), line=lineno)
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


def _meg_fields(line: str, start: int) -> dict[str, str]:
    """``key: value`` pairs of the ``|``-separated fields of a Megatron line from ``start``."""
    out = {}
    for part in line[start:].split("|"):
        k, sep, v = part.partition(":")
        if sep:
            out[k.strip()] = v
    return out


def _megatron_record(line: str, lineno: int) -> Record | None:
    """A Megatron iteration line: the common layout in one regex, any other field order by fields."""
    m = MEG_FAST.search(line) if len(line) < 4096 else None
    if m:
        try:  # the common case; odd values ('nan', '-') take the forgiving parser
            return _meg_fast_record(m.groups(), float, lineno)
        except ValueError:
            return _meg_fast_record(m.groups(), to_float, lineno)
    m = MEG_ITER.search(line)
    if not m:
        return None
    fields = _meg_fields(line, m.end())
    loss = next((fields[k] for k in ("lm loss", "loss", "lm-loss") if k in fields),
                next((v for k, v in fields.items() if k.endswith("loss") and "scale" not in k), None))
    secs = to_float(fields.get("elapsed time per iteration (ms)"))
    secs = secs / 1000.0 if secs is not None else to_float(fields.get("elapsed time per iteration (s)"))
    return Record("train", int(m.group(1)), to_float(loss), to_float(fields.get("learning rate")),
                  to_float(fields.get("grad norm")), to_float(fields.get("loss scale")),
                  to_int(fields.get("number of skipped iterations")),
                  to_int(fields.get("number of nan iterations")), None, secs,
                  to_float(fields.get("global batch size")), lineno)


def _meg_fast_record(groups: tuple, num: Callable[[str], float | None], lineno: int) -> Record:
    """The Record of a MEG_FAST match, its numbers read by ``num`` (float, or the forgiving one)."""
    it, unit, secs, lr, gbs, loss, ls, gn, sk, nan = groups
    s = num(secs)
    return Record("train", int(it), num(loss), num(lr), None if gn is None else num(gn),
                  None if ls is None else num(ls), int(sk), int(nan), None,
                  s / 1000.0 if s is not None and unit == "ms" else s, float(gbs), lineno)


def _overflow(line: str, lineno: int) -> Record | None:
    """An fp16 overflow line (DeepSpeed / apex / Megatron wording) with the scale it reduced to."""
    m = OVERFLOW.search(line)
    if m:
        _, reduced, reduced2, it = m.groups()  # the attempted scale is not needed
        return Record("overflow", to_int(it), loss_scale=to_float(reduced or reduced2), line=lineno,
                      text="overflow")
    m = REDUCE.search(line)
    if m:  # DeepSpeed's fused optimizer prints this beside (or instead of) the overflow line
        return Record("overflow", None, loss_scale=to_float(m.group(2)), line=lineno, text="reduce")
    return None
