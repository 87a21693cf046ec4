"""`kb lint` on broken rule files: each kind of breakage gives its message, with file and line."""
from pathlib import Path

import pytest
from click.testing import CliRunner

from troubleshoot.knowledge.lint import lint

RULE = Path("rules/nan-loss.yaml")


def mutate(root: Path, old: str, new: str, file: Path = RULE) -> None:
    path = root / file
    text = path.read_text()
    assert old in text, f"fixture changed: {old!r} not in {file}"
    path.write_text(text.replace(old, new, 1))


def new_problems(root: Path) -> list[str]:
    return [str(p) for p in lint(root) if "(DESIGN.md)" not in str(p)]


def test_the_minimal_tree_is_clean_apart_from_contract_ids(mini_root):
    assert new_problems(mini_root) == []
    assert any("required cause 'nan-loss.no-target-tokens' is missing" in str(p) for p in lint(mini_root))


BROKEN = [
    ("yaml syntax", "title: Loss becomes NaN", "title: [Loss: becomes", "rules/nan-loss.yaml:3: YAML syntax error"),
    ("typo in a field", "    evidence:\n      - when: data.mask.binary", "    evidnce:\n      - when: data.mask.binary",
     "rules/nan-loss.yaml:24: causes[0].evidnce: unknown field 'evidnce'"),
    ("prior out of range", "prior: 0.1", "prior: 1.5", "causes[0].prior: expected a number between 0 and 1"),
    ("negative likelihood ratio", "lr: 30", "lr: -3", "causes[0].evidence[0].lr: expected a likelihood ratio between 1e-6 and 1e6"),
    ("unknown fact", "when: data.mask.binary == false", "when: data.mask.binry == false",
     "nan-loss.invalid-mask.evidence[0].when: unknown fact 'data.mask.binry'"),
    ("unsafe expression", "when: nanloss.early", "when: __import__('os').getcwd()", "is not allowed"),
    ("unknown fix", "fixes: [fix-lower-lr]", "fixes: [fix-nope]", "nan-loss.lr-too-high.fixes: unknown fix 'fix-nope'"),
    ("duplicate cause id", "id: nan-loss.lr-too-high", "id: nan-loss.invalid-mask", "duplicate cause id 'nan-loss.invalid-mask'"),
    ("cause without fixes", "fixes: [fix-binary-mask]", "fixes: []", "nan-loss.invalid-mask: cause has no fixes"),
    ("fix without sources", '    steps: ["attention_mask = (attention_mask > 0).long()"]\n    sources: ["000_43af7a7a7fac43b8.txt"]',
     '    steps: ["attention_mask = (attention_mask > 0).long()"]\n    sources: []', "fix-binary-mask: fix has no sources"),
    ("unreachable check", "  - fact: train.precision\n", "  - fact: model.hidden_size\n",
     "unreachable check: no cause's evidence reads 'model.hidden_size'"),
    ("cycle in after", "    cost: 2\n", "    cost: 2\n    after: data.mask.binary\n", "cycle in 'after'"),
    ("missing required field", "    title: Learning rate too high\n", "", "causes[1]: missing required field 'title'"),
    ("id differs from file name", "id: nan-loss\n", "id: nan-losses\n", "id 'nan-losses' must equal the file name 'nan-loss'"),
    ("bad cause id", "id: nan-loss.lr-too-high", "id: lr_too_high", "expected a cause id 'nan-loss.<kebab-case>'"),
    ("unknown fact type", "type: bool, description: NaN within", "type: boolean, description: NaN within",
     "expected bool, number, choice or text, got 'boolean'"),
    ("probe hint nothing answers", "    ask: Which precision do you train in?\n",
     "    ask: Which precision do you train in?\n    probe: llmfix probe train.log\n",
     "rules/nan-loss.yaml:17: checks[2].probe: no probe publishes 'train.precision'"),
]


@pytest.mark.parametrize("old, new, expected", [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_broken_rule_file(mini_root, old, new, expected):
    mutate(mini_root, old, new)
    if "after: data.mask.binary" in new:  # a cycle needs both directions
        mutate(mini_root, "    cost: 1\n", "    cost: 1\n    after: nanloss.early\n")
    problems = new_problems(mini_root)
    assert any(expected in p for p in problems), "\n".join(problems)


def test_missing_article_and_missing_section(mini_root):
    (mini_root / "kb" / "nan-loss.md").write_text((mini_root / "kb" / "nan-loss.md").read_text()
                                                  .replace("## What did not work\n", ""))
    assert "kb/nan-loss.md: missing section '## What did not work'" in new_problems(mini_root)
    (mini_root / "kb" / "nan-loss.md").unlink()
    assert any("has no article kb/nan-loss.md" in p for p in new_problems(mini_root))


def test_cli_lint_exit_codes(mini_root, monkeypatch):
    from troubleshoot import cli

    monkeypatch.setattr("troubleshoot.knowledge.lint.knowledge_root", lambda: mini_root)
    result = CliRunner().invoke(cli.main, ["kb", "lint"])
    assert result.exit_code == 1 and "required symptom 'loss-spike' is missing" in result.output


def test_shared_facts_need_a_merge_rule(mini_root, monkeypatch):
    from troubleshoot import probes

    assert not new_problems(mini_root)
    monkeypatch.delitem(probes.SHARED_FACTS, "weights.nonfinite")
    assert any("fact 'weights.nonfinite' is published by weights and gradflow but has no merge rule" in p
               for p in new_problems(mini_root))
