"""The shipped knowledge stays healthy: lint clean, every symptom complete, every seed cited."""
from pathlib import Path

import pytest

from troubleshoot import contracts
from troubleshoot.knowledge.lint import lint
from troubleshoot.knowledge.read import knowledge_root

TESTS = Path(__file__).resolve().parent
SEEDS = ("000_43af7a7a7fac43b8.txt", "001_17b131665143d0d2.txt", "002_2969b0ea5896ed69.txt",
         "003_10afe1a0742d2c2f.txt", "004_39428b208c12ba79.txt")


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


@pytest.mark.parametrize("seed", SEEDS)
def test_every_seed_is_cited(seed):
    root = knowledge_root()
    texts = [p.read_text(encoding="utf-8") for p in [*root.glob("rules/*.yaml"), *root.glob("kb/*.md")]]
    assert any(seed in t for t in texts), f"{seed} is cited nowhere in rules/ or kb/"
