"""Benchmark: does `llmfix ask` find the established cause of real, resolved reports?

For every report of bench/corpus (see its README) this runs, as a new user would,

    python -m troubleshoot ask --no-input --json "<title>\\n<body>" --probe <artifact> ...

with every file the user pasted. When llmfix refuses an artifact (exit 2, "Error: <file>: ..."),
that file is dropped, counted as refused, and the run repeated without it. It then reports, per
split (tune / holdout) and separately for English, Chinese, new-symptom and old-symptom reports:

- symptom top-1 : the first symptom is the report's symptom;
- cause top-1 / top-3 : the labelled cause is first / among the first three causes; a cause
  listed as the same fault as the labelled one (its `same_fault`, a twin under another symptom
  that shares the confirming condition) counts as the labelled cause
  (an `uncovered:` label can never be found and counts as a miss; the "covered" rows leave
  those reports out);
- artifacts accepted : the share of pasted files llmfix read.

Rows: all, EN, ZH, new / old symptoms, covered labels (not `uncovered:`), labels in today's kb
(ids the knowledge of this checkout has, so what llmfix could rank at all), reports whose thread
the knowledge does not cite as a source (knowledge written from a thread makes its report a test
of memory), and each collection round.

    python bench/bench_causes.py                    # both splits, 2 workers
    python bench/bench_causes.py --split holdout
    python bench/bench_causes.py --out /tmp/causes.md

Writes bench/results/causes.md (summary and a per-report table with the rank of the labelled
cause) and prints the summary.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "bench" / "corpus"
RESULTS = REPO / "bench" / "results" / "causes.md"
SPLITS = ("tune", "holdout")
NEW_SYMPTOMS = frozenset({"zero-loss", "preference-divergence", "moe-routing", "save-export"})
TIMEOUT_S = 300
REFUSED = re.compile(r"^Error: (?P<path>.+?): (?P<why>.*)$", re.MULTILINE)


@dataclass
class Outcome:
    """What llmfix answered for one report."""

    split: str
    name: str
    report: dict
    symptoms: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    twins: dict[str, list[str]] = field(default_factory=dict)  # cause id -> its same_fault ids
    first_status: str = ""  # the status of the cause ranked first: how sure llmfix sounds
    accepted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0

    @property
    def rank(self) -> int | None:
        label = self.report["label"]
        return next((i for i, cid in enumerate(self.causes, 1)
                     if label == cid or label in self.twins.get(cid, ())), None)

    @property
    def symptom_ok(self) -> bool:
        return bool(self.symptoms) and self.symptoms[0] == self.report["symptom"]

    @property
    def is_new(self) -> bool:
        return self.report["symptom"] in NEW_SYMPTOMS

    @property
    def covered(self) -> bool:
        return not self.report["label"].startswith("uncovered:")


def load_reports(splits: tuple[str, ...]) -> list[tuple[str, Path, dict]]:
    found = []
    for split in splits:
        for path in sorted((CORPUS / split).glob("*/report.yaml")):
            found.append((split, path.parent, yaml.safe_load(path.read_text(encoding="utf-8"))))
    return found


def ask(text: str, artifacts: list[Path]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "troubleshoot", "ask", "--no-input", "--json", "--top", "50"]
    for artifact in artifacts:
        cmd += ["--probe", str(artifact)]
    cmd += ["--", text]  # a report that starts with "--mask-prompt" is text, not an option
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT_S,
                          check=False)


def refused_artifact(stderr: str, artifacts: list[Path]) -> Path | None:
    """The artifact a usage error names, if the error is about one of them."""
    for match in REFUSED.finditer(stderr):
        for artifact in artifacts:
            if match.group("path") in (str(artifact), artifact.name) or \
                    Path(match.group("path")).resolve() == artifact.resolve():
                return artifact
    return None


def run_one(split: str, directory: Path, report: dict) -> Outcome:
    outcome = Outcome(split, directory.name, report)
    artifacts = [directory / name for name in report.get("artifacts") or []]
    text = f"{report['title']}\n{report['body']}"
    start = time.perf_counter()
    while True:
        try:
            proc = ask(text, artifacts)
        except subprocess.TimeoutExpired:
            outcome.error = f"timeout after {TIMEOUT_S} s"
            break
        if proc.returncode == 2:
            bad = refused_artifact(proc.stderr, artifacts)
            if bad is not None:
                artifacts.remove(bad)
                outcome.refused.append(bad.name)
                continue
        if proc.returncode not in (0, 1):
            outcome.error = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            break
        answer = json.loads(proc.stdout)
        outcome.symptoms = [s["id"] for s in answer.get("symptoms", [])]
        outcome.causes = [c["id"] for c in answer.get("causes", [])]
        outcome.twins = {c["id"]: c.get("same_fault") or [] for c in answer.get("causes", [])}
        outcome.first_status = answer["causes"][0]["status"] if answer.get("causes") else "no cause"
        outcome.accepted = [a.name for a in artifacts]
        break
    outcome.seconds = time.perf_counter() - start
    return outcome


def share(hits: int, total: int) -> str:
    return f"{100 * hits / total:.0f} % ({hits}/{total})" if total else "–"


def summary_row(title: str, outcomes: list[Outcome]) -> str:
    n = len(outcomes)
    ranks = [o.rank for o in outcomes]
    pasted = sum(len(o.accepted) + len(o.refused) for o in outcomes)
    accepted = sum(len(o.accepted) for o in outcomes)
    return (f"| {title} | {n} | {share(sum(o.symptom_ok for o in outcomes), n)} "
            f"| {share(sum(r == 1 for r in ranks), n)} "
            f"| {share(sum(r is not None and r <= 3 for r in ranks), n)} "
            f"| {share(accepted, pasted)} |")


def known_cause_ids() -> set[str]:
    """Cause ids in the knowledge base this checkout ships (labels llmfix can rank at all)."""
    sys.path.insert(0, str(REPO))
    from troubleshoot.knowledge import load

    return set(load().causes)


def knowledge_text() -> str:
    """Everything the knowledge says, to tell which reports' threads it cites as sources."""
    files = [*REPO.glob("rules/**/*.yaml"), *REPO.glob("kb/*.md")]
    return "\n".join(p.read_text(encoding="utf-8") for p in files)


def cites(text: str, url: str) -> bool:
    """``url`` appears in ``text`` as a whole link: trl/issues/256 is not cited by trl/issues/2564."""
    return re.search(re.escape(url.rstrip("/")) + r"(?![\w/-])", text) is not None


def summary(outcomes: list[Outcome], splits: tuple[str, ...]) -> list[str]:
    known = known_cause_ids()
    cited = knowledge_text()
    lines = ["| reports | n | symptom top-1 | cause top-1 | cause top-3 | artifacts accepted |",
             "|---|---|---|---|---|---|"]
    for split in splits:
        mine = [o for o in outcomes if o.split == split]
        groups = [("all", mine), ("EN", [o for o in mine if o.report["language"] == "en"]),
                  ("ZH", [o for o in mine if o.report["language"] == "zh"]),
                  ("new symptoms", [o for o in mine if o.is_new]),
                  ("old symptoms", [o for o in mine if not o.is_new]),
                  ("covered labels", [o for o in mine if o.covered]),
                  ("labels in today's kb", [o for o in mine if o.report["label"] in known]),
                  ("thread not cited by the knowledge",
                   [o for o in mine if not cites(cited, o.report["url"])])]
        batches = sorted({o.report.get("batch", 1) for o in mine})
        if len(batches) > 1:
            groups += [(f"batch {b}", [o for o in mine if o.report.get("batch", 1) == b])
                       for b in batches]
        lines += [summary_row(f"{split} · {name}", group) for name, group in groups]
    return lines


SURE = ("confirmed", "likely")  # the statuses that sound sure (a user acts on them first)


def sureness(outcomes: list[Outcome], splits: tuple[str, ...]) -> list[str]:
    """How often the first cause is right, by how sure its status sounds: a diagnosis must be
    right when it sounds sure (a confirmed or likely first cause that is wrong costs a user most)."""
    statuses = ["confirmed", "likely", "possible", "untested", "no cause"]
    lines = ["| reports | first cause's status | n | share of reports | right (cause top-1) |",
             "|---|---|---|---|---|"]
    for split in splits:
        mine = [o for o in outcomes if o.split == split and not o.error]
        groups = [(status, [o for o in mine if o.first_status == status]) for status in statuses]
        groups.insert(2, ("confirmed or likely", [o for o in mine if o.first_status in SURE]))
        lines += [f"| {split} | {status} | {len(group)} | {share(len(group), len(mine))} "
                  f"| {share(sum(o.rank == 1 for o in group), len(group))} |"
                  for status, group in groups if group]
    return lines


def per_report_table(outcomes: list[Outcome]) -> list[str]:
    lines = ["| split | report | lang | symptom (first answered) | label | rank | first cause | artifacts |",
             "|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        first = o.symptoms[0] if o.symptoms else "–"
        mark = "✓" if o.symptom_ok else "✗"
        files = f"{len(o.accepted)}/{len(o.accepted) + len(o.refused)}"
        if o.refused:
            files += " (refused: " + ", ".join(o.refused) + ")"
        rank = o.error or (str(o.rank) if o.rank else "–")
        lines.append(f"| {o.split} | [{o.name}]({o.report['url']}) | {o.report['language']} "
                     f"| {mark} {o.report['symptom']} ({first}) | `{o.report['label']}` | {rank} "
                     f"| `{o.causes[0] if o.causes else '–'}` | {files} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=SPLITS, action="append")
    parser.add_argument("--workers", type=int, default=2, choices=(1, 2))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    splits = tuple(args.split or SPLITS)
    reports = load_reports(splits)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        outcomes = list(pool.map(lambda r: run_one(*r), reports))
    elapsed = time.perf_counter() - start
    uncovered = sorted({o.report["label"] for o in outcomes if not o.covered})
    head = summary(outcomes, splits)
    sure = sureness(outcomes, splits)
    text = ["# llmfix on real resolved reports: cause ranking", "",
            (f"`python bench/bench_causes.py` · {len(outcomes)} reports · {elapsed:.0f} s "
             f"with {args.workers} workers · corpus: bench/corpus (README there)."), "",
            ("Cause top-1/top-3 count `uncovered:` labels as misses; the *covered labels* rows "
             "leave them out. Labels from issue 15's new ids count as misses until the knowledge "
             "ships them; the *labels in today's kb* rows keep only labels the shipped knowledge "
             "has."), "", *head, "",
            "## Right when it sounds sure", "",
            ("The status of the cause ranked first (`confirmed`, `likely`: llmfix sounds sure; "
             "`possible`, `untested`: it does not) against whether that cause is the established "
             "one."), "", *sure, "",
            f"Uncovered causes ({len(uncovered)}): " + (", ".join(f"`{u}`" for u in uncovered) or "none"),
            "", "## Per report", "", *per_report_table(outcomes), ""]
    return write_results(args.out, text, head + [""] + sure, outcomes)


def write_results(out: Path, text: list[str], shown: list[str], outcomes: list[Outcome]) -> int:
    """Write the results file, print its summary, and fail when a run errored."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(text), encoding="utf-8")
    print("\n".join(shown))
    print(f"wrote {out}")
    errors = [o for o in outcomes if o.error]
    for o in errors:
        print(f"error: {o.split}/{o.name}: {o.error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
