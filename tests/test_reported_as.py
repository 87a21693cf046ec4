"""A cause's `reported_as`: how public reports worded the fault, with the threads they come from.

Read into the knowledge, shown by `kb show` and on the site's cause page with its links, and
scored by the words-shared evidence (evidence/lexical.py), so a report that talks like earlier
reports of a cause leans towards it. docs/knowledge-format.md, "How reports word a cause".
"""
from pathlib import Path

import pytest

from troubleshoot.evidence import lexical
from troubleshoot.knowledge.lint import lint
from troubleshoot.knowledge.loading import load
from troubleshoot.report.kbview import show
from troubleshoot.site.build import build

THREAD = "https://github.com/example/trainer/issues/42"
PHRASES = ("[V100] qlora run: loss turns nan only with the paged optimizer kernel",
           "V100 上 qlora 训练 loss 变成 nan")


@pytest.fixture
def reported_root(mini_root: Path) -> Path:
    rules = mini_root / "rules" / "nan-loss.yaml"
    text = rules.read_text()
    anchor = "    fixes: [fix-lower-lr]\n"
    assert anchor in text, "fixture changed"
    lines = "".join(f"      - text: '{p}'\n        sources: ['{THREAD}']\n" for p in PHRASES)
    rules.write_text(text.replace(anchor, anchor + "    reported_as:\n" + lines, 1))
    return mini_root


def test_read_and_lint_clean(reported_root):
    kb = load(str(reported_root))
    cause = kb.causes["nan-loss.lr-too-high"]
    assert [(r.text, r.sources) for r in cause.reported_as] == [(p, [THREAD]) for p in PHRASES]
    assert not [p for p in lint(reported_root) if "(DESIGN.md)" not in str(p)]


def test_the_phrases_are_part_of_the_cause_description(reported_root):
    """The words of earlier reports ("qlora", "paged": nowhere else in the mini tree) move a new
    report that uses them towards the cause."""
    kb = load(str(reported_root))
    assert all(p in lexical.description(kb, kb.causes["nan-loss.lr-too-high"]) for p in PHRASES)
    report = "qlora on a V100 with the paged optimizer: the loss is nan after a while"
    factors = lexical.overlaps(kb, report, ["nan-loss.lr-too-high", "nan-loss.invalid-mask"])
    assert factors["nan-loss.lr-too-high"].factor > 1 > factors["nan-loss.invalid-mask"].factor
    assert {"qlora", "paged"} <= set(factors["nan-loss.lr-too-high"].words)


def test_kb_show_and_the_cause_page_link_the_threads(reported_root, tmp_path):
    kb = load(str(reported_root))
    shown = show(kb, kb.causes["nan-loss.lr-too-high"], width=200)
    assert "Reported as:" in shown and all(f"{p} ({THREAD})" in shown for p in PHRASES)
    build(kb, tmp_path / "site")
    page = (tmp_path / "site" / "causes" / "nan-loss.lr-too-high.html").read_text()
    assert "How people have reported it" in page and "V100 上 qlora 训练 loss 变成 nan" in page
    assert page.count(f">{THREAD}</a>") == len(PHRASES)
    sources = (tmp_path / "site" / "sources.html").read_text()
    assert THREAD in sources and "causes/nan-loss.lr-too-high.html" in sources
