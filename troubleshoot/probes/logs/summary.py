"""One streaming pass over a training log: every record fed once to the detectors, into a Summary.

``analyse(path)`` reads the log through ``loaders.logs.iter_records`` and keeps O(1) memory: the
detectors' fixed windows (``detectors``, ``trackers``), the block summaries
(``stats.Blocks``) and capped lists of saves, evaluations and errors. Quirks of real logs are
handled here, once: several ranks printing the same line, restarts, gaps, skipped steps that
repeat the previous grad norm, ``grad norm: 0.000`` meaning "not measured". What the Summary
means is read by ``reading``.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from math import inf as INF
from math import isfinite
from pathlib import Path

from ...errors import ArtifactError
from ...loaders.logs import Record, detect_format, iter_records
from .detectors import SpikeDetector
from .preference import PrefTracker
from .stats import Blocks
from .trackers import LossScaleTracker, LRTracker
from .zeroloss import ZeroLossTracker

GAP_FACTOR = 5            # an iteration jump > 5 logging intervals is a gap in the log
MAX_SAVES, MAX_VALS, MAX_ERRORS = 100_000, 10_000, 20
SYSTEM = [("oom", re.compile(r"out of memory|OutOfMemoryError")),
          ("nccl-timeout", re.compile(r"NCCL.*(?:[Tt]imeout|timed out)|[Ww]atchdog caught collective")),
          ("lost-gpu", re.compile(r"fallen off the bus|GPU is lost|No CUDA GPUs are available|NODE FAIL")),
          ("cuda-error", re.compile(r"CUDA error|illegal memory access|CUBLAS_STATUS|CUDNN_STATUS|"
                                    r"device-side assert|\bXid\b")),
          ("storage", re.compile(r"No space left on device|Disk quota exceeded|Stale file handle|"
                                 r"Input/output error|Read-only file system")),
          ("cancelled", re.compile(r"CANCELLED AT")),
          ("exception", re.compile(r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception)\b(?::|$)"))]


@dataclass
class Summary:
    """Everything one log told the detectors; bounded in size whatever the log length."""

    path: str
    fmt: str
    records: int = 0
    first_it: int | None = None
    last_it: int | None = None
    interval: int | None = None
    first_loss: float | None = None
    last_loss: float | None = None
    min_loss: float = math.inf
    nan: tuple[int, int, int] | None = None   # first iteration, line, count
    last_finite: tuple[int, float] | None = None
    gaps: list = field(default_factory=list)        # (from, to, line)
    restarts: list = field(default_factory=list)    # (from, to, line)
    saves: list = field(default_factory=list)       # sorted iterations with a checkpoint
    save_steps: int | None = None
    vals: list = field(default_factory=list)
    errors: list = field(default_factory=list)      # (kind, iteration, line, text)
    oom_phase: str | None = None
    overflow_lines: int = 0
    ds_skipped: int = 0
    truncated: str | None = None
    loss: SpikeDetector = field(default_factory=lambda: SpikeDetector("spike"))
    gn: SpikeDetector = field(default_factory=lambda: SpikeDetector("explosion", log_space=True))
    ls: LossScaleTracker = field(default_factory=LossScaleTracker)
    lr: LRTracker = field(default_factory=LRTracker)
    blocks: Blocks = field(default_factory=Blocks)
    zero: ZeroLossTracker = field(default_factory=ZeroLossTracker)
    pref: PrefTracker = field(default_factory=PrefTracker)


class Analysis:
    """Feed records one at a time; ``finish()`` returns the Summary. Holds O(1) memory."""

    def __init__(self, path: str, fmt: str) -> None:
        self.s = Summary(path, fmt)
        self._diffs: list[int] = []
        self._pending_overflow = [0, 0, None]   # overflow lines, 'reducing' lines, last scale
        self._gap_next = False
        self._last_gn: float | None = None
        self._ds_lr: tuple[int, float] | None = None
        self._phase = "train"

    def feed(self, r: Record) -> None:
        """One record of any kind; records arrive in log order."""
        s = self.s
        kind = r.kind
        if kind == "train":
            placed = self._place(r)
            if placed is not None:
                self._values(r, *placed)
        elif kind == "overflow":
            s.overflow_lines += 1
            po = self._pending_overflow
            po[1 if r.text == "reduce" else 0] += 1
            po[2] = r.loss_scale if r.loss_scale is not None else po[2]
        elif kind == "dsstep":
            s.ds_skipped = max(s.ds_skipped, r.skipped or 0)
            if r.lr is not None:
                self._ds_lr = (r.iteration, r.lr)
        elif kind in ("save", "load"):
            if r.iteration is not None and r.iteration not in s.saves[-3:]:
                if len(s.saves) >= MAX_SAVES:
                    s.saves = s.saves[::2]  # thin the old ones; the recent ones matter most
                s.saves.append(r.iteration)
        elif kind == "meta" and r.text == "save_steps":
            s.save_steps = r.iteration
        elif kind == "val":
            self._phase = "eval"
            if r.val_loss is not None:
                if len(s.vals) >= MAX_VALS:
                    s.vals = s.vals[::2]
                s.vals.append((r.iteration if r.iteration is not None else s.last_it or 0, r.val_loss))
        elif kind == "phase":
            self._phase = r.text
        elif kind == "gap":
            self._gap_next = True
        elif kind == "error":
            self._error(r)

    def _place(self, r: Record) -> tuple[int, bool] | None:
        """(iteration, after a gap) of a new record; None for a repeat of the last one. Notes
        restarts (the iteration went back), gaps and the logging interval."""
        s = self.s
        it = r.iteration if r.iteration is not None else (s.last_it or 0) + 1
        gap = self._gap_next
        last = s.last_it
        if last is not None:
            if it == last:
                return None  # the same line printed by several ranks
            if it < last:
                if len(s.restarts) < MAX_ERRORS:
                    s.restarts.append((last, it, r.line))
                s.loss.restart()
                s.gn.restart()
                self._last_gn = None
            elif s.interval and it - last > GAP_FACTOR * s.interval:
                gap = True
            elif len(self._diffs) < 16:
                self._diffs.append(it - last)
                counts = Counter(self._diffs)
                s.interval = min(counts, key=lambda d: (-counts[d], d))  # most common step
            if gap and it > last and len(s.gaps) < MAX_ERRORS:
                s.gaps.append((last, it, r.line))
        else:
            s.first_it = it
        if gap or self._phase != "train":
            self._gap_next, self._phase = False, "train"
        s.records += 1
        s.last_it = it
        return it, gap

    def _values(self, r: Record, it: int, gap: bool) -> None:
        """Loss, grad norm, loss scale and LR of one placed record into the detectors and blocks."""
        s = self.s
        s.zero.update(it, r.loss, r.grad_norm)
        if r.prefs:
            s.pref.update(it, r.prefs, r.loss)
        # a step skipped for overflow repeats the previous grad norm; 0.000 means "not measured"
        skipped = r.skipped or 0
        scale = r.loss_scale
        po = self._pending_overflow
        if po[0] or po[1]:
            skipped = max(skipped, po[0] or po[1])
            if scale is None:
                scale = po[2]
            self._pending_overflow = [0, 0, None]
        gn = r.grad_norm
        if gn is not None:
            if gn == 0.0 or gn == self._last_gn or skipped:
                self._last_gn, gn = gn, None
            else:
                self._last_gn = gn
        lr = r.lr
        if lr is None and self._ds_lr is not None and self._ds_lr[0] == it:
            lr = self._ds_lr[1]
        line = r.line
        if scale is not None or skipped:
            s.ls.update(it, scale, skipped, line)
            if scale is not None and not (0 < scale < INF):
                scale = None
        if lr is not None:
            s.lr.update(it, lr, line)
            if not isfinite(lr):
                lr = None
        loss = r.loss
        if loss is not None and not isfinite(loss):
            loss, bad = None, True
        else:
            bad = bool(r.nan_count)
        if gn is not None and not (0 < gn < INF):
            if scale is None and not isfinite(gn):  # with fp16 loss scaling it is an overflow
                bad = True
            gn = None
        if bad:
            first = s.nan or (it, line, 0)
            s.nan = (first[0], first[1], first[2] + 1)
        if loss is not None:
            if s.first_loss is None:
                s.first_loss = loss
            s.last_loss = loss
            if loss < s.min_loss:
                s.min_loss = loss
            s.last_finite = (it, loss)
            ev = s.loss.update(it, loss, line, gap)
            if ev is not None and s.ls.drop_start is not None and s.ls.drop_start < ev.onset:
                ev.ls_drop_start, ev.ls_drop_factor = s.ls.drop_start, s.ls.factor_now()
        if gap:
            s.gn.rebase()  # grad norms drift over long spans: never compare across a gap
        if gn is not None:
            s.gn.update(it, gn, line, gap)
        secs = r.seconds
        if secs and r.batch:
            secs /= r.batch
        s.blocks.add(it, loss, gn, scale, lr, secs)

    def _error(self, r: Record) -> None:
        """Keep an error line that matches a known system failure (first match wins)."""
        s = self.s
        for kind, rx in SYSTEM:
            if rx.search(r.text):
                if kind == "oom" and s.oom_phase is None:
                    s.oom_phase = "eval" if self._phase == "eval" else "train"
                if len(s.errors) < MAX_ERRORS and not any(e[3] == r.text for e in s.errors):
                    s.errors.append((kind, r.iteration, r.line, r.text))
                return

    def finish(self) -> Summary:
        """Close what is still open (events, the last block) and return the Summary."""
        s = self.s
        s.loss.finish()
        s.gn.finish()
        s.blocks.finish()
        s.saves = sorted(set(s.saves))
        return s


def analyse(path: str | Path, fmt: str | None = None) -> Summary:
    """Stream one log through the detectors. A log cut short mid-way gives a partial Summary
    (``truncated`` says why); one with nothing readable raises ArtifactError."""
    p = Path(path)
    fmt = fmt or detect_format(p)
    if fmt is None:
        raise ArtifactError(p, "not a training log (no loss, iteration or step lines recognised)")
    a = Analysis(str(p), fmt)
    try:
        for rec in iter_records(p, fmt):
            a.feed(rec)
    except ArtifactError as err:
        if not a.s.records:
            raise
        a.s.truncated = err.problem
    except (OSError, UnicodeError) as err:
        raise ArtifactError(p, f"cannot read log: {err}") from None
    return a.finish()
