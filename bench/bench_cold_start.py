"""Cold start of `llmfix ask --no-input --json "loss went nan"` against `python -c pass`.

DESIGN.md budget: within 5x of a bare interpreter start, and torch never imported on this path.
Run: python bench/bench_cold_start.py [--runs 15]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

ASK = [sys.executable, "-m", "troubleshoot", "ask", "--no-input", "--json", "loss went nan"]
PASS = [sys.executable, "-c", "pass"]
PROBE_TORCH = [sys.executable, "-c",
               "import sys, runpy; sys.argv=['llmfix','ask','--no-input','--json','loss went nan'];\n"
               "try:\n runpy.run_module('troubleshoot', run_name='__main__')\n"
               "except SystemExit: pass\n"
               "print('TORCH_IMPORTED' if 'torch' in sys.modules else 'NO_TORCH', file=sys.stderr)"]


def median_seconds(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    median_seconds(ASK, 2)  # warm the page cache and the knowledge cache
    bare, ask = median_seconds(PASS, args.runs), median_seconds(ASK, args.runs)
    torch_line = subprocess.run(PROBE_TORCH, capture_output=True, text=True).stderr.strip().splitlines()[-1]
    result = {"python_c_pass_ms": round(bare * 1000, 1), "ask_ms": round(ask * 1000, 1),
              "ratio": round(ask / bare, 2), "target_ratio": 5.0, "torch_imported": torch_line != "NO_TORCH"}
    print(json.dumps(result, indent=1))
    return 0 if result["ratio"] <= 5 and not result["torch_imported"] else 1


if __name__ == "__main__":
    sys.exit(main())
