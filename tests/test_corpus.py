"""The evaluation corpus (bench/corpus) stays well-formed: every report parses, names its
source, carries a label the knowledge can answer (or says it cannot), and the two halves of the
split never share a thread."""
import sys
from pathlib import Path

import pytest
import yaml

from troubleshoot import contracts

CORPUS = Path(__file__).resolve().parents[1] / "bench" / "corpus"
SPLITS = ("tune", "holdout")
REQUIRED = ("url", "repo", "title", "language", "symptom", "label", "cause", "body", "artifacts")


def _reports():
    return [(split, path) for split in SPLITS for path in sorted((CORPUS / split).glob("*/report.yaml"))]


REPORTS = _reports()


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_corpus_is_not_empty_and_both_halves_are_used():
    counts = {split: sum(1 for s, _ in REPORTS if s == split) for split in SPLITS}
    assert all(n > 0 for n in counts.values()), counts


@pytest.mark.parametrize("split,path", REPORTS, ids=[f"{s}/{p.parent.name}" for s, p in REPORTS])
def test_report_is_complete(shipped_kb, split, path):
    report = _load(path)
    missing = [key for key in REQUIRED if not report.get(key) and key != "artifacts"]
    assert not missing, f"{path}: missing {missing}"
    assert report["url"].startswith("https://"), report["url"]
    assert report["language"] in ("en", "zh")
    assert len(report["body"]) <= 4000
    assert report["symptom"] in set(contracts.SYMPTOM_IDS) | set(shipped_kb.symptoms)
    label = report["label"]
    known = set(shipped_kb.causes)
    assert label in known or (label.startswith("uncovered:") and len(label) > len("uncovered:")), label
    for name in report["artifacts"]:
        assert (path.parent / name).is_file(), f"{path.parent.name}: artifact {name} missing"
    extra = {p.name for p in path.parent.iterdir()} - {"report.yaml", *report["artifacts"]}
    assert not extra, f"{path.parent.name}: files not listed as artifacts: {extra}"


def test_halves_are_disjoint_by_url():
    urls = {split: [_load(p)["url"] for s, p in REPORTS if s == split] for split in SPLITS}
    for split in SPLITS:
        assert len(urls[split]) == len(set(urls[split])), f"duplicate url inside {split}"
    assert not set(urls["tune"]) & set(urls["holdout"])


def _cites(text: str, url: str) -> bool:
    """A whole link, as bench/bench_causes.py counts it (its "not cited" row)."""
    sys.path.insert(0, str(CORPUS.parent))
    from bench_causes import cites

    return cites(text, url)


def test_a_citation_is_a_whole_link():
    assert _cites("see https://github.com/huggingface/trl/issues/256 (fix)", "https://github.com/huggingface/trl/issues/256")
    assert not _cites("https://github.com/huggingface/trl/issues/2564", "https://github.com/huggingface/trl/issues/256")


def test_no_untouched_holdout_thread_is_a_source_of_the_knowledge():
    """Knowledge written from a holdout thread turns its report into a test of memory. From round 3
    on (filed after this check existed) no holdout thread may be cited in rules/ or kb/; the earlier
    rounds' cited threads are counted apart in bench/results/causes.md."""
    sys.path.insert(0, str(CORPUS.parent))
    from bench_causes import knowledge_text

    text = knowledge_text()
    cited = [_load(p)["url"] for s, p in REPORTS
             if s == "holdout" and _load(p).get("batch", 1) >= 3 and _cites(text, _load(p)["url"])]
    assert not cited, cited


def test_sureness_counts_the_first_causes_status_against_the_label():
    """The "right when it sounds sure" table: one row per status that occurs, and the
    confirmed-or-likely row pools both (a wrong sure answer must show up there)."""
    sys.path.insert(0, str(CORPUS.parent))
    from bench_causes import Outcome, sureness

    def outcome(status, first, label="nan-loss.lr-too-high"):
        return Outcome("tune", status, {"label": label}, causes=[first], first_status=status)

    rows = sureness([outcome("confirmed", "nan-loss.lr-too-high"), outcome("likely", "nan-loss.bad-init"),
                     outcome("untested", "nan-loss.lr-too-high")], ("tune",))
    cells = {row.split(" | ")[1]: row.split(" | ")[2:] for row in rows[2:]}
    assert cells["confirmed"][:1] == ["1"] and cells["confirmed"][2].startswith("100 %")
    assert cells["likely"][2].startswith("0 %")
    assert cells["confirmed or likely"][0] == "2" and cells["confirmed or likely"][2].startswith("50 %")
    assert "possible" not in cells
