"""Reading facts and error signatures from pasted text: time against paste size (linear?).

Every knowledge expression is linear-time by construction (kb lint refuses unbounded or nested
quantifiers), and each is only tried around the occurrences of its literals; this measures it on
a realistic paste (HF Trainer log lines, then a CUDA traceback), on a hostile one (dense
prefilter hits, one multi-megabyte line) and on a DeepSpeed fp16 log with OVERFLOW on every line
(a literal on every line: windows anchor on an expression's rarest required words instead).
Run: python bench/bench_evidence.py
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from troubleshoot.evidence import extract
from troubleshoot.knowledge import load

LOG_LINE = "{'loss': 2.3125, 'grad_norm': 1.094, 'learning_rate': 1.8e-05, 'epoch': 0.12}\n"
TRACEBACK = ("Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n    trainer.train()\n"
             "RuntimeError: CUDA error: device-side assert triggered\n"
             "Indexing.cu:1289: indexSelectLargeIndex: Assertion `srcIndex < srcSelectDimSize` failed.\n")
HOSTILE = "lr lr lr loss loss ((((( --- ==== :::: nan nan 0.0 "
OVERFLOW = ("[INFO] [loss_scaler.py:183] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, "
            "reducing to 32768\n")


def paste(kind: str, megabytes: int) -> str:
    size = megabytes << 20
    if kind == "realistic":
        return LOG_LINE * (size // len(LOG_LINE)) + TRACEBACK
    if kind == "overflow-every-line":
        return OVERFLOW * (size // len(OVERFLOW)) + LOG_LINE
    return HOSTILE * (size // 2 // len(HOSTILE)) + "x" * (size // 2) + "\n" + TRACEBACK


def seconds(kb, text: str) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        extract(kb, text)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    kb = load()
    extract(kb, "warm the pattern table")
    result = {}
    for kind in ("realistic", "hostile", "overflow-every-line"):
        times = {mb: seconds(kb, paste(kind, mb)) for mb in (1, 2, 4, 8)}
        result[kind] = {"seconds_per_size_mb": {mb: round(t, 3) for mb, t in times.items()},
                        "8mb_over_1mb": round(times[8] / times[1], 2)}
    result["linear"] = all(r["8mb_over_1mb"] <= 12 for r in result.values() if isinstance(r, dict))
    print(json.dumps(result, indent=1))
    return 0 if result["linear"] else 1


if __name__ == "__main__":
    sys.exit(main())
