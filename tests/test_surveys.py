"""The cause surveys (bench/surveys/causes*/) stay usable as a measure: every thread is complete and
labelled with a symptom and a cause the knowledge has (or says it lacks), no thread is also a
corpus report, and the knowledge never cites a half-B thread (half B is what nobody wrote from)."""
import sys
from pathlib import Path

import pytest
import yaml

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
from bench_causes import cites, knowledge_text  # noqa: E402
from bench_survey import half, label_now  # noqa: E402

REQUIRED = ("url", "repo", "language", "title", "symptom", "label", "cause")  # and a body, empty when the
# first post was only a title or a screenshot
FILES = sorted(BENCH.glob("surveys/causes*/*.yaml"))
THREADS = [(path, entry) for path in FILES for entry in yaml.safe_load(path.read_text(encoding="utf-8"))]


def test_surveys_exist_and_have_both_halves():
    assert FILES
    assert {half(entry["url"]) for _, entry in THREADS} == {"A", "B"}


@pytest.mark.parametrize("path,entry", THREADS, ids=[f"{p.parent.name}/{e['url']}" for p, e in THREADS])
def test_thread_is_complete_and_labelled(shipped_kb, path, entry):
    assert all(entry.get(key) for key in REQUIRED), [key for key in REQUIRED if not entry.get(key)]
    assert isinstance(entry.get("body"), str)
    assert entry["language"] in ("en", "zh")
    assert entry["symptom"] in shipped_kb.symptoms
    label = str(entry["label"])
    if label.startswith(("new:", "uncovered:")):
        assert label.split(":", 1)[1]
    else:
        assert label in shipped_kb.causes, label


def test_no_thread_is_read_twice():
    urls = [entry["url"].rstrip("/") for _, entry in THREADS]
    assert len(urls) == len(set(urls))
    corpus = {yaml.safe_load(p.read_text(encoding="utf-8"))["url"].rstrip("/")
              for p in BENCH.glob("corpus/*/*/report.yaml")}
    assert not set(urls) & corpus


def test_knowledge_never_cites_a_half_b_thread():
    text = knowledge_text()
    cited = [entry["url"] for _, entry in THREADS if half(entry["url"]) == "B" and cites(text, entry["url"])]
    assert not cited, cited


def test_a_new_label_counts_once_the_knowledge_has_the_cause():
    known = {"nan-loss.lr-too-high"}
    assert label_now("new:nan-loss.lr-too-high", known) == "nan-loss.lr-too-high"
    assert label_now("new:nan-loss.not-yet", known) == "uncovered:nan-loss.not-yet"
    assert label_now("uncovered:one-off", known) == "uncovered:one-off"
    assert label_now("nan-loss.lr-too-high", known) == "nan-loss.lr-too-high"
