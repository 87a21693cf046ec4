"""Benchmark: parse time per MB is linear, on normal logs and on adversarial long lines.

docs/resource-policy.md promises that no input makes a reader super-linear. For each family this
writes files of 1x, 2x and 4x a base size, reads each with the reader llmfix uses, and prints the
seconds per MB; a linear reader gives about the same s/MB at every size (the ``x4/x1`` column
near 1 or below, as fixed costs spread; a quadratic one would show about 4; "-" where the x1 run
took under 10 ms, too short to compare).

- ``nanogpt``    : ordinary ``iter N: loss X, time T ms`` lines (``loaders.logs.iter_records``);
- ``overflow``   : 64 KB lines of repeated ``OVERFLOW!`` with no scale, the pattern that made the
                   old ``head.*?tail`` regex quadratic (``iter_records`` on a DeepSpeed log);
- ``cr-ansi``    : tqdm-style lines ended by CR only, with ANSI colour codes;
- ``jsonl``      : JSONL metrics, one record per line;
- ``deep-jsonl`` : JSONL whose every line is 5000-deep nested arrays (each refused as one line);
- ``deep-json``  : one config.json-like document nested 5000 deep per 1 MB (``files.parse_json``,
                   refused in one line; the time to refuse must not grow faster than the bytes).

    python bench/bench_parse.py            # base 4 MB (about a minute)
    python bench/bench_parse.py --mb 1     # quicker
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from troubleshoot.errors import ArtifactError  # noqa: E402 - after the path insert
from troubleshoot.files import parse_json  # noqa: E402
from troubleshoot.loaders.logs import iter_records  # noqa: E402

MB = 1 << 20


def repeat_to(unit: bytes, size: int) -> bytes:
    return unit * max(1, size // len(unit))


def nanogpt(size: int) -> bytes:
    lines = b"".join(b"iter %d: loss %.4f, time 12.5ms\n" % (i, 2 + (i % 97) / 100) for i in range(20000))
    return repeat_to(lines, size)


def overflow(size: int) -> bytes:
    head = b"[2024-01-01 00:00:00] [INFO] [stage_1_and_2.py:1780:step] [deepspeed] fp16 dynamic loss scale\n"
    return head + repeat_to(b"OVERFLOW! " * 6553 + b"\n", size)


def cr_ansi(size: int) -> bytes:
    return repeat_to(b"".join(b"\x1b[32miter %d\x1b[0m: loss %.3f, time 9.0ms\r" % (i, 2.0) for i in range(5000)), size)


def jsonl(size: int) -> bytes:
    return repeat_to(b"".join(b'{"step": %d, "loss": %.4f, "learning_rate": 3e-4}\n' % (i, 2.0) for i in range(20000)),
                     size)


def deep_jsonl(size: int) -> bytes:
    good = b'{"step": 1, "loss": 2.0}\n'
    return good + repeat_to(b'{"step": 2, "x": ' + b"[" * 5000 + b"]" * 5000 + b"}\n", size)


def deep_json(size: int) -> bytes:
    return b'{"a": ' + b"[" * 5000 + b" 1" + b" " * max(0, size - 10_020) + b"]" * 5000 + b"}"


def read_log(path: Path) -> int:
    return sum(1 for _ in iter_records(path))


def read_json(path: Path) -> int:
    try:
        parse_json(path.read_bytes(), path)
    except ArtifactError:
        return 0
    return 1


FAMILIES = {"nanogpt": (nanogpt, "train.log", read_log), "overflow": (overflow, "train.log", read_log),
            "cr-ansi": (cr_ansi, "train.log", read_log), "jsonl": (jsonl, "metrics.jsonl", read_log),
            "deep-jsonl": (deep_jsonl, "metrics.jsonl", read_log), "deep-json": (deep_json, "config.json", read_json)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=4.0, help="base size in MB (runs x1, x2, x4)")
    args = ap.parse_args()
    print(f"{'family':<12} {'MB':>6} {'seconds':>8} {'s/MB':>7} {'records':>8}   x4/x1")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (make, filename, read) in FAMILIES.items():
            per_mb = []
            for scale in (1, 2, 4):
                path = Path(tmp) / filename
                path.write_bytes(make(int(args.mb * scale * MB)))
                mb = path.stat().st_size / MB
                start = time.perf_counter()
                n = read(path)
                seconds = time.perf_counter() - start
                per_mb.append(seconds / mb)
                ratio = "" if scale < 4 else "-" if per_mb[0] * args.mb < 0.01 else f"{per_mb[-1] / per_mb[0]:.2f}"
                print(f"{name:<12} {mb:6.1f} {seconds:8.3f} {seconds / mb:7.3f} {n:8d}   {ratio}", flush=True)


if __name__ == "__main__":
    main()
