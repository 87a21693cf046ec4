"""The shipped knowledge stays healthy: lint clean, every symptom complete, every seed cited."""
from pathlib import Path

import pytest

from troubleshoot import contracts
from troubleshoot.knowledge.lint import lint
from troubleshoot.knowledge.read import knowledge_root

TESTS = Path(__file__).resolve().parent
from seedorigins import ORIGINS, cites


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
