"""Benchmark: peak memory and time of ``llmfix probe`` on 100,000 tiny tensors.

Budget (issue 14, docs/resource-policy.md "Budgets of a whole run"): no input takes more than
30 s or 400 MiB of peak RSS for the whole process. Per-tensor overhead is what breaks it here:
the data is 1.6 MB, but ``torch.load`` alone built 100k tensors and storages at about 2 KB each.

    python bench/bench_many_tensors.py              # 100,000 tensors in each layout
    python bench/bench_many_tensors.py --n 20000    # quicker

Layouts (tests/ckptfactory.py ``many_tensors``): one .pt state dict, one .safetensors, an HF
folder of 4 safetensors shards with index and config.json, and an Adam optimizer state dict with
that many parameter states (300k tensors: step, exp_avg, exp_avg_sq). One tensor holds a NaN,
and each run must find it (``weights.nonfinite`` / ``optimizer.nonfinite``). ``tiny`` is the
same command on a .pt of one tensor: python + torch + llmfix, the constant part.

Each run is the real CLI (``python -m troubleshoot probe --json FILE``) in its own child process;
its peak RSS and CPU seconds (user + system) come from ``os.wait4`` (on a shared machine the CPU
seconds are the steadier number), the files are built in another child beforehand.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXPECT = {"pt": "weights.nonfinite", "safetensors": "weights.nonfinite", "hf-sharded": "weights.nonfinite",
          "optimizer": "optimizer.nonfinite", "tiny": "weights.nonfinite"}


def build(where: Path, n: int) -> dict[str, Path]:
    sys.path.insert(0, str(REPO / "tests"))
    import ckptfactory as cf

    made = {layout: cf.many_tensors(where / layout, layout, n) for layout in cf.MANY_LAYOUTS}
    made["tiny"] = cf.many_tensors(where / "tiny", "pt", cf.NAN_AT + 1)
    return made


def measure(path: Path) -> dict:
    """Seconds, peak RSS and finding ids of one ``probe --json`` in a child process."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "troubleshoot", "probe", "--json", str(path)], cwd=REPO,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - start
    try:
        findings = [f["id"] for f in json.loads(out)["findings"]]
    except (ValueError, KeyError):
        findings = []
    return {"seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss * 1024,
            "exit": os.waitstatus_to_exitcode(status),
            "findings": findings}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="tensors (or parameter states) per layout")
    ap.add_argument("--child", nargs=2, metavar=("N", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps({k: str(v) for k, v in build(Path(args.child[1]), int(args.child[0])).items()}))
        return 0
    where = Path(tempfile.mkdtemp(prefix="llmfix-many-"))
    try:  # built in a child: Linux carries a process's peak RSS across fork and exec
        made = json.loads(subprocess.run([sys.executable, __file__, "--child", str(args.n), str(where)],
                                         capture_output=True, text=True, check=True).stdout)
        ok = True
        print(f"{args.n:,} tensors of shape (4,) per layout; budget 30 s (CPU) and 400 MiB peak RSS per run")
        print(f"{'layout':12s} {'seconds':>8s} {'cpu s':>6s} {'peak MiB':>9s} {'exit':>5s}  found")
        for layout, path in made.items():
            r = measure(Path(path))
            want = EXPECT[layout]
            found = want in r["findings"]
            ok &= found and r["cpu"] < 30 and r["rss"] < 400 << 20  # wall time is CPU time on an idle machine
            print(f"{layout:12s} {r['seconds']:8.1f} {r['cpu']:6.1f} {r['rss'] / 2**20:9.0f} {r['exit']:5d}  "
                  f"{want if found else 'MISSING ' + want}")
        print("within budget, NaN found in every layout" if ok else "OVER BUDGET or NaN missed")
        return 0 if ok else 1
    finally:
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
