"""Cold start of `llmfix ask --no-input --json "loss went nan"` against `python -c pass`.

DESIGN.md budget: within 5x of a bare interpreter start, and torch never imported on this path.

Each command is a fresh process. Runs alternate between the two commands, so that load from
other processes on a shared machine falls on both alike; the medians are reported as wall-clock
time (the budget) and as CPU time (user + system, steadier on a busy machine).

* warm: the usual case, the user's cache (~/.cache/llmfix) already holding the knowledge snapshot;
* cold cache: every run with an empty cache folder (the first run after an install or an edit of
  rules/ or kb/: the YAML is parsed and validated, then the snapshot written), for information.

PYTHONDONTWRITEBYTECODE is removed from the children's environment: with it set, Python never
keeps the compiled modules of a source checkout and recompiles them at every start.

The baseline depends on the install. In an editable install (`pip install -e`, the test set-up)
every interpreter, `python -c pass` included, imports the editable finder from its .pth (~12 ms
of a ~25 ms start); in a regular install (`pip install .`, README's first command) `python -c
pass` takes ~10 ms, and the same warm `ask` is ~11x it. So the result also names the install and
times `python -c "import click, rapidfuzz"`, the floor of any command line built on those two
product-card packages (~45 ms of the ~115 ms of a warm `ask` on the 2-core machine): the ratio to
that floor is what llmfix's own start-up work adds.

Run: python bench/bench_cold_start.py [--runs 21] [--cold-runs 5]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ASK = [sys.executable, "-m", "troubleshoot", "ask", "--no-input", "--json", "loss went nan"]
PASS = [sys.executable, "-c", "pass"]
FLOOR = [sys.executable, "-c", "import click, rapidfuzz"]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run of ``cmd``."""
    start = time.perf_counter()
    child = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(child.pid, 0)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def medians(runs: list[tuple[float, float]]) -> dict[str, float]:
    return {"wall_ms": round(1000 * statistics.median(w for w, _ in runs), 1),
            "cpu_ms": round(1000 * statistics.median(c for _, c in runs), 1)}


def install(env: dict[str, str]) -> str:
    """'editable' when llmfix runs from this source checkout, else 'regular'."""
    out = subprocess.run([sys.executable, "-c", "import troubleshoot; print(troubleshoot.__file__)"], env=env,
                         cwd=tempfile.gettempdir(), capture_output=True, text=True).stdout.strip()
    return "editable" if out.startswith(str(REPO)) else "regular"


def imported(env: dict[str, str]) -> set[str]:
    """The modules a warm ask imports (``-X importtime`` lists each one)."""
    err = subprocess.run([sys.executable, "-X", "importtime", *ASK[1:]], env=env, cwd=REPO, capture_output=True,
                         text=True).stderr
    return {line.rsplit("|", 1)[-1].strip() for line in err.splitlines() if line.startswith("import time:")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--cold-runs", type=int, default=5)
    args = parser.parse_args()
    for _ in range(2):
        timed(ASK, ENV)  # the page cache and the knowledge snapshot are warm from here on
    bare, floor, warm = [], [], []
    for _ in range(args.runs):
        bare.append(timed(PASS, ENV))
        floor.append(timed(FLOOR, ENV))
        warm.append(timed(ASK, ENV))
    cold_bare, cold = [], []
    for _ in range(args.cold_runs):
        with tempfile.TemporaryDirectory() as cache:
            cold_bare.append(timed(PASS, ENV))
            cold.append(timed(ASK, {**ENV, "XDG_CACHE_HOME": cache}))
    modules = imported(ENV)
    base, ask, libs = medians(bare), medians(warm), medians(floor)
    result = {"runs": args.runs, "load_average": round(os.getloadavg()[0], 1), "install": install(ENV),
              "python_c_pass": base, "import_click_rapidfuzz": libs, "ask_warm": ask,
              "ratio_wall": round(ask["wall_ms"] / base["wall_ms"], 2),
              "ratio_cpu": round(ask["cpu_ms"] / base["cpu_ms"], 2), "target_ratio": 5.0,
              "ratio_to_click_rapidfuzz_wall": round(ask["wall_ms"] / libs["wall_ms"], 2)}
    if cold:
        cold_base, cold_ask = medians(cold_bare), medians(cold)
        result.update(cold_runs=args.cold_runs, ask_cold_cache=cold_ask,
                      cold_ratio_wall=round(cold_ask["wall_ms"] / cold_base["wall_ms"], 2))
    result.update(torch_imported=any(m.split(".")[0] == "torch" for m in modules),
                  yaml_imported_when_warm="yaml" in modules, modules_imported=len(modules))
    print(json.dumps(result, indent=1))
    return 0 if result["ratio_wall"] <= result["target_ratio"] and not result["torch_imported"] else 1


if __name__ == "__main__":
    sys.exit(main())
