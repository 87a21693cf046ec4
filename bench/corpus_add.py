"""File new reports into the evaluation corpus, deciding tune/holdout by a fixed rule.

    python bench/corpus_add.py staged.yaml [--dry-run]

``staged.yaml`` is a YAML list; each entry holds the fields of ``report.yaml`` (see
bench/corpus/README.md) plus ``files``: a mapping of artifact file name -> verbatim text.

Why a rule and not a choice: helpers tune the product on ``tune/`` while the corpus grows, so
nobody may pick where a report lands. The split is 50/50, stratified by (language, new-vs-old
symptom): a report goes to the half that has fewer reports of its stratum; a tie is broken by
the first bit of sha256(SEED + url). New reports of one call are placed in the order of that
hash, never in the order they were written. A report already filed (same url) is never moved.
"""
from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections import Counter
from pathlib import Path

import yaml

CORPUS = Path(__file__).resolve().parent / "corpus"
SPLITS = ("tune", "holdout")
SEED = "llmfix-corpus-2026-11-23"
NEW_SYMPTOMS = frozenset({"zero-loss", "preference-divergence", "moe-routing", "save-export"})
REPORT_KEYS = ("url", "repo", "title", "language", "date", "batch", "symptom", "label", "cause",
               "cause_source", "body")


def url_hash(url: str) -> str:
    return hashlib.sha256((SEED + url).encode()).hexdigest()


def stratum(report: dict) -> tuple[str, bool]:
    return report["language"], report["symptom"] in NEW_SYMPTOMS


def existing_reports() -> list[tuple[str, Path, dict]]:
    """(split, directory, report) for every filed report."""
    found = []
    for split in SPLITS:
        for report_file in sorted((CORPUS / split).glob("*/report.yaml")):
            found.append((split, report_file.parent,
                          yaml.safe_load(report_file.read_text(encoding="utf-8"))))
    return found


def slug(number: int, url: str) -> str:
    """``NNN-<repo>-<issue number>``: ascii, short, and the same for an English or Chinese title."""
    m = re.search(r"github\.com/[^/]+/([^/]+)/(?:issues|pull|discussions)/(\d+)", url)
    tail = f"{m.group(1)}-{m.group(2)}" if m else re.sub(r"^https?://", "", url)
    tail = re.sub(r"[^a-z0-9]+", "-", tail.lower()).strip("-")[:48]
    return f"{number:03d}-{tail}"


def choose_split(counts: Counter, report: dict) -> str:
    key = stratum(report)
    tune, holdout = counts[("tune", key)], counts[("holdout", key)]
    if tune != holdout:
        return "tune" if tune < holdout else "holdout"
    return SPLITS[int(url_hash(report["url"])[0], 16) & 1]


class _Dumper(yaml.SafeDumper):
    """Multi-line text as literal blocks, so a report reads like the thread it came from."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)


def write_report(directory: Path, report: dict, files: dict[str, str]) -> None:
    directory.mkdir(parents=True)
    fields = {k: report[k] for k in REPORT_KEYS if k in report}
    if fields.get("date") is not None:
        fields["date"] = str(fields["date"])
    fields["artifacts"] = sorted(files)
    (directory / "report.yaml").write_text(
        yaml.dump(fields, Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=100),
        encoding="utf-8")
    for name, text in files.items():
        (directory / name).write_text(text if text.endswith("\n") else text + "\n",
                                      encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("staged", type=Path)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--batch", type=int, default=1,
                        help="collection round the reports belong to (reported separately, so a "
                             "round collected after tuning began gives an untouched measure)")
    args = parser.parse_args(argv)
    staged = yaml.safe_load(args.staged.read_text(encoding="utf-8")) or []
    filed = existing_reports()
    known = {r["url"] for _, _, r in filed}
    counts = Counter((split, stratum(r)) for split, _, r in filed)
    number = max((int(d.name[:3]) for _, d, _ in filed), default=0)
    for entry in sorted(staged, key=lambda e: url_hash(e["url"])):
        if entry["url"] in known:
            print(f"skip (already filed): {entry['url']}", file=sys.stderr)
            continue
        number += 1
        entry = {**entry, "batch": args.batch}
        split = choose_split(counts, entry)
        counts[(split, stratum(entry))] += 1
        known.add(entry["url"])
        directory = CORPUS / split / slug(number, entry["url"])
        print(f"{split:8s} {directory.name}")
        if not args.dry_run:
            write_report(directory, entry, entry.get("files") or {})
    return 0


if __name__ == "__main__":
    sys.exit(main())
