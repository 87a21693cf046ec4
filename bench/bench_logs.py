"""Benchmark: a 1,000,000-line Megatron log analysed in seconds with bounded memory.

DESIGN.md budget: "Log analysis streams: a 1,000,000-line Megatron log analysed in seconds with
bounded memory". This writes such a log (the seed-002 line layout, one iteration per line, with a
DeepSpeed OVERFLOW line, validation and 'saving checkpoint' lines every 1000 iterations and a loss
spike at 70 %), then runs, each in its own subprocess so that ``ru_maxrss`` is that run's peak:

- ``import``  : python + the llmfix log modules imported, nothing read (the constant part of RSS);
- ``regex``   : a minimal regex-only parse: one regex per line for iteration and lm loss, float()
                of the loss, nothing kept -- the floor for "reading the log";
- ``llmfix``  : ``probes.logs.run`` on the file: detect the format, stream every record through
                the detectors, build findings, facts and the timeline.

    python bench/bench_logs.py                  # 1,000,000 lines (~310 MB) in a temp dir
    python bench/bench_logs.py --lines 200000   # quicker
    python bench/bench_logs.py --keep /tmp/m.log
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = {
    "import": """
import json, resource, sys, time
t = time.perf_counter()
from troubleshoot.probes import logs
print(json.dumps({"seconds": time.perf_counter() - t, "records": 0,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""",
    "regex": """
import json, re, resource, sys, time
rx = re.compile(r"iteration\\s+(\\d+)/.*?lm loss: (\\S+)")
t = time.perf_counter()
n = 0
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for line in f:
        m = rx.search(line)
        if m:
            float(m.group(2))
            n += 1
print(json.dumps({"seconds": time.perf_counter() - t, "records": n,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""",
    "llmfix": """
import json, resource, sys, time
from troubleshoot.loaders import detect
from troubleshoot.probes import ProbeContext, logs
t = time.perf_counter()
obs = logs.run(ProbeContext([detect(sys.argv[1])]))
summary = next(f for f in obs.findings if f.id == "logs.summary")
print(json.dumps({"seconds": time.perf_counter() - t, "records": summary.value["records"],
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "found": [f"{f.severity} {f.id}: {f.message}" for f in obs.findings if f.severity != "info"]}))
""",
}


def write_log(path: Path, lines: int, seed: int = 0) -> int:
    """A Megatron log of about ``lines`` lines; returns the exact number written."""
    rnd = random.Random(seed)
    iters = int(lines / 1.004)  # plus a few validation / save / overflow lines
    spike = int(iters * 0.7)
    written = 0
    with open(path, "w") as f:
        for it in range(1, iters + 1):
            loss = 2.5 + 8.3 * (1 + it / 300) ** -0.45
            if spike <= it < spike + 400:
                loss *= 1 + 1.2 * (1 - (it - spike) / 400) ** 2
            loss *= 1 + rnd.gauss(0, 0.01)
            gn = 1.5 * math.exp(rnd.gauss(0, 0.15)) * (30 if spike - 5 <= it <= spike + 3 else 1)
            lr = 6e-5 * min(1.0, it / 2000)
            if it % 1000 == 999:
                f.write("[2022-01-19 13:09:13,305] [INFO] [stage_1_and_2.py:1644:step] [deepscale] "
                        "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 131072.0, reducing to 65536.0\n")
                written += 1
            f.write(f" iteration {it:8d}/{iters:8d} | consumed samples: {it * 96:12d} | elapsed time per "
                    f"iteration (ms): 18706.1 | learning rate: {lr:.3E} | global batch size:    96 | lm loss: "
                    f"{loss:.6E} | loss scale: 65536.0 | grad norm: {gn:.3f} | num zeros: 0.0 | number of "
                    "skipped iterations:   0 | number of nan iterations:   0 |\n")
            written += 1
            if it % 1000 == 0:
                f.write(f" validation loss at iteration {it} | lm loss value: {loss * 1.05:.6E} | lm loss "
                        f"PPL: {math.exp(loss):.6E} | \nsaving checkpoint at iteration {it:8d} to /ck\n")
                written += 2
    return written


def measure(name: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD[name], str(path)], capture_output=True, text=True,
                         env=env, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall"] = time.perf_counter() - t
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="write (or reuse) the log at this path and keep it")
    args = ap.parse_args()
    tmp = None
    if args.keep and args.keep.exists():
        path = args.keep
        lines = sum(1 for _ in open(path, "rb"))
    else:
        tmp = None if args.keep else tempfile.TemporaryDirectory()
        path = args.keep or Path(tmp.name) / "megatron.log"
        t = time.perf_counter()
        lines = write_log(path, args.lines)
        print(f"wrote {lines:,} lines ({path.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t:.1f} s")
    with open(path, "rb") as f:  # warm the page cache, in chunks: the parent's peak RSS is
        while f.read(1 << 20):   # inherited by the children it forks
            pass
    rows = {name: measure(name, path) for name in ("import", "regex", "llmfix")}
    print(f"\n{'run':<8} {'records':>10} {'seconds':>8} {'lines/s':>12} {'peak RSS MiB':>13}")
    for name, r in rows.items():
        rate = f"{lines / r['seconds']:,.0f}" if r["records"] else "-"
        print(f"{name:<8} {r['records']:>10,} {r['seconds']:>8.2f} {rate:>12} {r['rss_mb']:>13.1f}")
    ratio = rows["llmfix"]["seconds"] / rows["regex"]["seconds"]
    extra = rows["llmfix"]["rss_mb"] - rows["import"]["rss_mb"]
    print(f"\nllmfix / regex-only time: {ratio:.1f}x; llmfix RSS above the bare import: {extra:.1f} MiB")
    print("what llmfix found (the log has a loss spike at 70 % with the grad norm 5 iterations ahead):")
    for line in rows["llmfix"]["found"]:
        print("  " + line)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
