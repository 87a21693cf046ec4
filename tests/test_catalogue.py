"""The shipped knowledge stays healthy: lint clean, every symptom complete, every seed cited."""
from pathlib import Path

import pytest
from seedorigins import ORIGINS, cites

from troubleshoot import contracts
from troubleshoot.knowledge import knowledge_root
from troubleshoot.knowledge.lint import lint

TESTS = Path(__file__).resolve().parent


def test_lint_is_clean():
    problems = lint()
    assert not problems, "\n".join(map(str, problems))


@pytest.mark.parametrize("sid", contracts.SYMPTOM_IDS)
def test_every_symptom_has_article_fixtures_and_enough_aliases(shipped_kb, sid):
    symptom = shipped_kb.symptoms[sid]
    assert sid in shipped_kb.articles
    for folder in ("paraphrases", "scenarios", "seed_facts"):
        assert (TESTS / folder / f"{sid}.yaml").is_file(), f"tests/{folder}/{sid}.yaml missing"
    aliases = [a for group in symptom.aliases.values() for a in group]
    chinese = [a for a in aliases if any("\u4e00" <= ch <= "\u9fff" for ch in a)]
    assert len(aliases) >= 15 and len(chinese) >= 5, f"{sid}: {len(aliases)} aliases, {len(chinese)} Chinese"
    assert symptom.checks, f"{sid} asks nothing"


def test_every_cause_and_fix_cites_a_source(shipped_kb):
    assert all(c.sources for c in shipped_kb.causes.values())
    assert all(f.sources and f.steps for f in shipped_kb.fixes.values())


@pytest.mark.parametrize("seed", sorted(ORIGINS))
def test_every_seed_is_cited_by_its_public_origin(seed):
    root = knowledge_root()
    texts = [p.read_text(encoding="utf-8") for p in [*root.glob("rules/*.yaml"), *root.glob("kb/*.md")]]
    assert any(cites(seed, t) for t in texts), f"the public origin of {seed} is cited nowhere in rules/ or kb/"
    assert not any(seed in t for t in texts), f"{seed} (a file users cannot open) is cited in rules/ or kb/"


def test_articles_link_their_github_and_arxiv_references():
    """Issues, pull requests and papers in articles are links a reader can follow, not plain text."""
    import re

    plain = []
    for path in (knowledge_root() / "kb").glob("*.md"):
        text = re.sub(r"\[[^\]]*\]\([^)]*\)", "", path.read_text(encoding="utf-8"))  # drop the links
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        plain += [f"{path.name}: {m.group(0)}" for m in
                  re.finditer(r"\b[A-Za-z0-9][\w.-]*/[\w.-]+(#\d+| PR #\d+)|\barXiv:\d{4}\.\d{4,5}", text)]
    assert not plain, plain
