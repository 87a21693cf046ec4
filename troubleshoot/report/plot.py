"""``--plot``: a training log as a figure, with the events, the rollback point and the data-skip
window marked (the terminal timeline's series, ``report/timeline.py``, drawn with matplotlib).

matplotlib is imported only when a figure is asked for; the CLI calls ``write_plots`` after the
probes ran (probes never draw), for the terminal and ``--json`` alike.
"""
from __future__ import annotations

from pathlib import Path

from ..observations import Finding, Timeline


def write_plots(attachments: dict, out: str) -> list[Finding]:
    """Draw one figure per log timeline (``out``, then ``out-2`` ...); findings saying what happened."""
    timelines = [tl for block in attachments.values() if isinstance(block, dict)
                 for tl in block.get("timelines", ())]
    found: list[Finding] = []
    for k, tl in enumerate(timelines):
        path = out if k == 0 else str(Path(out).with_stem(f"{Path(out).stem}-{k + 1}"))
        try:
            plot(tl, path)
        except ImportError:
            return found + [Finding("logs.plot_missing", "info", "--plot needs matplotlib: pip install "
                                    "'llmfix[plot]' (or pip install matplotlib)", out)]
        except (OSError, ValueError) as err:
            found.append(Finding("logs.plot_failed", "warning", f"could not write the plot: {err}", path))
            continue
        found.append(Finding("logs.plot", "info", f"plot of {tl.name} written to {path}", path, path))
    return found


COLOURS = {"^": "tab:red", "D": "tab:red", "N": "black", "G": "tab:orange", "L": "tab:purple",
           "W": "tab:green", "E": "tab:olive", "R": "tab:blue"}


def plot(tl: Timeline, out: str) -> str:
    """Write a PNG (any format matplotlib knows from the suffix) of loss, grad norm, loss scale and
    LR with the events marked. Raises ImportError when matplotlib is missing."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    its, nan = tl.its, float("nan")
    rows = [("loss", tl.loss, "linear"), ("grad norm", tl.grad_norm, "log"), ("loss scale", tl.loss_scale, "log"),
            ("learning rate", tl.lr, "linear")]
    rows = [r for r in rows if any(v == v for v in r[1])]
    fig, axes = plt.subplots(len(rows) or 1, 1, sharex=True, figsize=(11, 2.3 * max(1, len(rows))),
                             squeeze=False)
    for ax, (label, values, scale) in zip(axes[:, 0], rows):
        ax.plot(its, values, lw=1, color="tab:gray" if label != "loss" else "tab:blue")
        if label == "loss":
            ax.fill_between(its, [v if v == v else nan for v in tl.loss_lo],
                            [v if v == v else nan for v in tl.loss_hi], alpha=0.2, lw=0)
            if tl.vals:
                ax.plot([v[0] for v in tl.vals], [v[1] for v in tl.vals], ".", color="tab:green",
                        label="validation")
        if scale == "log":
            ax.set_yscale("log", base=2 if label == "loss scale" else 10)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        for it, sym, text in tl.markers:
            if it is not None:
                ax.axvline(it, color=COLOURS.get(sym, "k"), lw=1.2 if sym != "R" else 1.5,
                           ls="--" if sym in "RWE" else "-", label=text if ax is axes[0, 0] else None)
        if tl.window is not None:
            ax.axvspan(*tl.window, color="tab:red", alpha=0.08,
                       label="skip window" if ax is axes[0, 0] else None)
    if its and its[-1] > its[0]:
        axes[0, 0].set_xlim(its[0], its[-1])  # the skip window may reach past the log
    axes[0, 0].set_title(f"{tl.name}  ({tl.records} records)")
    axes[0, 0].legend(loc="upper right", fontsize=7, ncols=2)
    axes[-1, 0].set_xlabel("iteration")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
