"""Benchmark: cause ranking on a survey of real threads, per half (does knowledge generalise?).

A survey (bench/surveys/README.md) is a YAML list of real, resolved public threads, each with its
title, the reporter's first post (``body``), the symptom the user saw and the established cause
(``label``): an existing cause id, ``new:<cause id>`` for a cause the survey found missing (it
counts once the knowledge ships that id, and as a miss until then), or ``uncovered:<kebab>``.
Each thread falls in half A or B by the first hex digit of sha1(url) (0-7: A). Knowledge is
written from half A only; half B says whether it carries over to threads nobody wrote from.

Every thread is asked as bench_causes.py asks a corpus report (``llmfix ask --no-input --json``
on its title and body; surveys keep no artifacts), and the same rows are reported per half.

    python bench/bench_survey.py bench/surveys/causes14/*.yaml --out bench/results/survey14.md
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_causes import REPO, known_cause_ids, run_one, summary, sureness, write_results  # noqa: E402

HALVES = ("A", "B")


def half(url: str) -> str:
    return "A" if hashlib.sha1(url.strip().encode()).hexdigest()[0] in "01234567" else "B"


def label_now(label: str, known: set[str]) -> str:
    """A ``new:`` label as the cause id once the knowledge has it, else as an uncovered label."""
    if not label.startswith("new:"):
        return label
    cause = label.removeprefix("new:")
    return cause if cause in known else f"uncovered:{cause}"


def load_threads(files: list[Path]) -> list[tuple[str, Path, dict]]:
    known = known_cause_ids()
    threads = []
    for path in files:
        for entry in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            report = {**entry, "label": label_now(str(entry["label"]), known), "artifacts": []}
            name = f"{path.stem}/{entry['url'].rstrip('/').split('/', 3)[-1]}"
            threads.append((half(entry["url"]), Path(name), report))
    return threads


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--workers", type=int, default=2, choices=(1, 2))
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "survey.md")
    args = parser.parse_args(argv)
    threads = load_threads(args.files)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        outcomes = list(pool.map(lambda t: run_one(*t), threads))
    elapsed = time.perf_counter() - start
    head, sure = summary(outcomes, HALVES), sureness(outcomes, HALVES)
    names = " ".join(str(p) for p in args.files)  # as given on the command line
    text = ["# llmfix on a survey of real threads: cause ranking per half", "",
            f"`python bench/bench_survey.py {names}` · {len(outcomes)} threads · {elapsed:.0f} s.", "",
            ("Half A was read to write knowledge; half B was not. `new:` labels count once the "
             "knowledge has that cause id (until then they read `uncovered:`)."), "", *head, "",
            "## Right when it sounds sure", "", *sure, ""]
    return write_results(args.out, text, head + [""] + sure, outcomes)


if __name__ == "__main__":
    sys.exit(main())
