"""A training log in the terminal: one line of sparklines per series, with the events marked.

Sample (``llmfix probe 08_megatron_bigscience.log``: the BLOOM-176B spike at 31219)::

    08_megatron_bigscience.log  iterations 31214-31251  (11 records)
      loss     ▁▁▂▁▁█▄▃▂▁▁  2.199 .. 5.098
      gnorm    ▁▂▃▅▆█▇▇█▁▁  0.205 .. 960.4 (log)
      lr       ████████▅▁▁  5.277e-05 .. 5.279e-05
      events    G  ^
               ^ loss spike  G grad-norm explosion

The grad norm left its level at 31215 (G), the loss at 31218 (^). One column per record while
they fit; beyond WIDTH records columns are iterations (a gap in the log is an empty column) and
each shows the worst value of its records (highest loss and grad norm, lowest loss scale), so
short spikes stay visible. The same series as a figure: ``report/plot.py`` (``--plot``).
"""
from __future__ import annotations

import math
from typing import Any

from ..observations import Timeline

BARS = "▁▂▃▄▅▆▇█"
WIDTH = 64
PRIORITY = "N^DLGERW"  # which marker wins a shared column
LABELS = {"^": "loss spike", "D": "loss divergence", "N": "NaN", "G": "grad-norm explosion",
          "L": "loss-scale collapse", "W": "warmup end", "E": "early warning", "R": "rollback"}


def _columns(its: list[int], width: int) -> tuple[list[int], int]:
    """Column of each block: one per block when they fit, else placed by iteration."""
    if len(its) <= width:
        return list(range(len(its))), len(its)
    return [_place(its, i, width) for i in its], width


def _column_of(its: list[int], it: int, width: int) -> int:
    if len(its) <= width:
        return min(range(len(its)), key=lambda k: (abs(its[k] - it), -its[k]))
    return _place(its, it, width)


def _place(its: list[int], it: int, width: int) -> int:
    """The column of iteration ``it`` on a scale from the smallest to the largest iteration (a log
    of two runs appended out of order is not sorted)."""
    lo, hi = min(its), max(its)
    return 0 if hi == lo else min(width - 1, max(0, int((it - lo) / (hi - lo) * (width - 1) + 0.5)))


def sparkline(its: list[int], values: list[float], width: int = WIDTH, log: bool = False,
              worst=max) -> tuple[str, float | None, float | None]:
    """(line, min, max) of ``values`` placed by iteration; NaN values leave their column blank."""
    pos, cols = _columns(its, width)
    buckets: list[list[float]] = [[] for _ in range(cols)]
    for p, v in zip(pos, values):
        if v == v and math.isfinite(v) and (v > 0 or not log):
            buckets[p].append(math.log(v) if log else v)
    picked = [worst(b) if b else None for b in buckets]
    finite = [v for v in picked if v is not None]
    if not finite:
        return "", None, None
    lo, hi = min(finite), max(finite)
    span = hi / 2 - lo / 2  # halved: hi - lo overflows to inf for values near +-1e308
    chars = []
    for v in picked:
        if v is None:
            chars.append(" ")
        else:
            k = 0 if hi == lo else int((v / 2 - lo / 2) / span * (len(BARS) - 1) + 0.5)
            chars.append(BARS[k])
    back = (lambda x: math.exp(x)) if log else (lambda x: x)
    return "".join(chars), back(lo), back(hi)


def timeline_lines(attachments: dict[str, Any]) -> list[str]:
    """The terminal lines of the Timelines among a report's attachments, a blank line after each
    family's."""
    lines: list[str] = []
    for block in attachments.values():
        timelines = block.get("timelines") if isinstance(block, dict) else None
        if timelines:
            lines += [row for tl in timelines for row in timeline(tl)] + [""]
    return lines


def timeline(tl: Timeline, width: int = WIDTH) -> list[str]:
    """The terminal lines for one log (see the module docstring)."""
    its = tl.its
    if not its:
        return [f"{tl.name}  (no training records)"]
    lines = [f"{tl.name}  iterations {its[0]}-{its[-1]}  ({tl.records} records)"]
    rows = [("loss", tl.loss_hi, False, max), ("gnorm", tl.grad_norm, True, max),
            ("lscale", tl.loss_scale, True, min), ("lr", tl.lr, False, max)]
    for label, values, log, worst in rows:
        line, lo, hi = sparkline(its, values, width, log, worst)
        if not line.strip() or (label == "lscale" and not tl.loss_scale_seen):
            continue
        rng = f"{lo:.4g}" if lo == hi else f"{lo:.4g} .. {hi:.4g}"
        lines.append(f"  {label:<8} {line}  {rng}{' (log)' if log and lo != hi else ''}")
    if tl.markers:
        _, cols = _columns(its, width)
        row = [" "] * cols
        for it, sym, _ in tl.markers:
            if it is None:
                continue
            c = _column_of(its, it, width)
            if row[c] == " " or PRIORITY.index(sym) < PRIORITY.index(row[c]):
                row[c] = sym
        lines.append(f"  {'events':<8} {''.join(row).rstrip()}")
        used = sorted({sym for _, sym, _ in tl.markers}, key=PRIORITY.index)
        lines.append("  " + " " * 9 + "  ".join(f"{sym} {LABELS[sym]}" for sym in used))
    return lines
