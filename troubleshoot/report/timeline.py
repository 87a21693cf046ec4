"""Pictures of a training log: a terminal timeline of sparklines and an optional matplotlib figure.

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
short spikes stay visible.
The figure (``--plot out.png``) draws the same series with the events, the rollback point and
the data-skip window marked; matplotlib is imported only when a figure is asked for.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..probes.logs_reading import Reading

BARS = "▁▂▃▄▅▆▇█"
WIDTH = 64
PRIORITY = "N^DLGERW"  # which marker wins a shared column
LABELS = {"^": "loss spike", "D": "loss divergence", "N": "NaN", "G": "grad-norm explosion",
          "L": "loss-scale collapse", "W": "warmup end", "E": "early warning", "R": "rollback"}


def _columns(its: list[int], width: int) -> tuple[list[int], int]:
    """Column of each block: one per block when they fit, else placed by iteration."""
    if len(its) <= width:
        return list(range(len(its))), len(its)
    lo, hi = its[0], its[-1]
    return [min(width - 1, int((i - lo) / (hi - lo) * (width - 1) + 0.5)) for i in its], width


def _column_of(its: list[int], it: int, width: int) -> int:
    if len(its) <= width:
        return min(range(len(its)), key=lambda k: (abs(its[k] - it), -its[k]))
    lo, hi = its[0], its[-1]
    return min(width - 1, max(0, int((it - lo) / (hi - lo) * (width - 1) + 0.5)))


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
    chars = []
    for v in picked:
        if v is None:
            chars.append(" ")
        else:
            k = 0 if hi == lo else int((v - lo) / (hi - lo) * (len(BARS) - 1) + 0.5)
            chars.append(BARS[k])
    back = (lambda x: math.exp(x)) if log else (lambda x: x)
    return "".join(chars), back(lo), back(hi)


def timeline(rd: "Reading", width: int = WIDTH) -> list[str]:
    """The terminal lines for one log (see the module docstring)."""
    s = rd.summary
    b = s.blocks
    name = s.path.rsplit("/", 1)[-1]
    if not b.it:
        return [f"{name}  (no training records)"]
    lines = [f"{name}  iterations {b.it[0]}-{b.it[-1]}  ({s.records} records)"]
    rows = [("loss", b.loss_hi, False, max), ("gnorm", b.gn, True, max),
            ("lscale", b.ls, True, min), ("lr", b.lr, False, max)]
    for label, values, log, worst in rows:
        line, lo, hi = sparkline(b.it, values, width, log, worst)
        if not line.strip() or (label == "lscale" and not s.ls.seen):
            continue
        rng = f"{lo:.4g}" if lo == hi else f"{lo:.4g} .. {hi:.4g}"
        lines.append(f"  {label:<8} {line}  {rng}{' (log)' if log and lo != hi else ''}")
    if rd.markers:
        _, cols = _columns(b.it, width)
        row = [" "] * cols
        for it, sym, _ in rd.markers:
            if it is None:
                continue
            c = _column_of(b.it, it, width)
            if row[c] == " " or PRIORITY.index(sym) < PRIORITY.index(row[c]):
                row[c] = sym
        lines.append(f"  {'events':<8} {''.join(row).rstrip()}")
        used = sorted({sym for _, sym, _ in rd.markers}, key=PRIORITY.index)
        lines.append("  " + " " * 9 + "  ".join(f"{sym} {LABELS[sym]}" for sym in used))
    return lines


COLOURS = {"^": "tab:red", "D": "tab:red", "N": "black", "G": "tab:orange", "L": "tab:purple",
           "W": "tab:green", "E": "tab:olive", "R": "tab:blue"}


def plot(rd: "Reading", out: str) -> str:
    """Write a PNG (any format matplotlib knows from the suffix) of loss, grad norm, loss scale and
    LR with the events marked. Raises ImportError when matplotlib is missing."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    s, b = rd.summary, rd.summary.blocks
    nan = float("nan")
    rows = [("loss", b.loss, "linear"), ("grad norm", b.gn, "log"), ("loss scale", b.ls, "log"),
            ("learning rate", b.lr, "linear")]
    rows = [r for r in rows if any(v == v for v in r[1])]
    fig, axes = plt.subplots(len(rows) or 1, 1, sharex=True, figsize=(11, 2.3 * max(1, len(rows))),
                             squeeze=False)
    for ax, (label, values, scale) in zip(axes[:, 0], rows):
        ax.plot(b.it, values, lw=1, color="tab:gray" if label != "loss" else "tab:blue")
        if label == "loss":
            ax.fill_between(b.it, [v if v == v else nan for v in b.loss_lo],
                            [v if v == v else nan for v in b.loss_hi], alpha=0.2, lw=0)
            if s.vals:
                ax.plot([v[0] for v in s.vals], [v[1] for v in s.vals], ".", color="tab:green",
                        label="validation")
        if scale == "log":
            ax.set_yscale("log", base=2 if label == "loss scale" else 10)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        for it, sym, text in rd.markers:
            if it is not None:
                ax.axvline(it, color=COLOURS.get(sym, "k"), lw=1.2 if sym != "R" else 1.5,
                           ls="--" if sym in "RWE" else "-", label=text if ax is axes[0, 0] else None)
        if rd.main is not None:
            ax.axvspan(*rd.main.window, color="tab:red", alpha=0.08,
                       label="skip window" if ax is axes[0, 0] else None)
    if b.it and b.it[-1] > b.it[0]:
        axes[0, 0].set_xlim(b.it[0], b.it[-1])  # the skip window may reach past the log
    axes[0, 0].set_title(f"{s.path.rsplit('/', 1)[-1]}  ({s.records} records)")
    axes[0, 0].legend(loc="upper right", fontsize=7, ncols=2)
    axes[-1, 0].set_xlabel("iteration")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
