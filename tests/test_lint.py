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
    ("fix without sources", '    steps: ["attention_mask = (attention_mask > 0).long()"]\n    sources: ["https://github.com/Oneflow-Inc/libai/blob/main/docs/source/notes/FAQ.md"]',
     '    steps: ["attention_mask = (attention_mask > 0).long()"]\n    sources: []', "fix-binary-mask: fix has no sources"),
    ("seed file name as a source", 'sources: ["https://github.com/liguodongiot/llm-action"]', 'sources: ["003_10afe1a0742d2c2f.txt"]',
     "'003_10afe1a0742d2c2f.txt' is not a public link"),
    ("internal notes as a source", 'sources: ["https://github.com/liguodongiot/llm-action"]', 'sources: ["KNOWLEDGE.md nan_loss"]',
     "'KNOWLEDGE.md nan_loss' is not a public link"),
    ("plain-text GitHub reference", 'sources: ["https://github.com/liguodongiot/llm-action"]', 'sources: ["liguodongiot/llm-action README.md"]',
     "is not a public link"),
    ("prior below the floor", "prior: 0.1", "prior: 0.01", "prior 0.01 is below the floor 0.03"),
    ("the same condition counted twice", "    evidence:\n      - when: data.mask.binary == false\n",
     "    evidence:\n      - when: data.mask.binary == false and nanloss.early == true\n        lr: 3\n      - when: data.mask.binary == false\n",
     "repeats evidence[1] (data.mask.binary == false): counted twice"),
    ("unreachable check", "  - fact: train.precision\n", "  - fact: model.hidden_size\n",
     "unreachable check: no cause's evidence reads 'model.hidden_size'"),
    ("cycle in after", "    cost: 2\n", "    cost: 2\n    after: data.mask.binary\n", "cycle in 'after'"),
    ("missing required field", "    title: Learning rate too high\n", "", "causes[1]: missing required field 'title'"),
    ("id differs from file name", "id: nan-loss\n", "id: nan-losses\n", "id 'nan-losses' must equal the file name 'nan-loss'"),
    ("bad cause id", "id: nan-loss.lr-too-high", "id: lr_too_high", "expected a cause id 'nan-loss.<kebab-case>'"),
    ("unknown fact type", "type: bool, description: NaN within", "type: boolean, description: NaN within",
     "expected bool, number, choice or text, got 'boolean'"),
    ("observed_when reads an unknown fact", "summary: The training loss turns into NaN or Inf.\n",
     "summary: The training loss turns into NaN or Inf.\nobserved_when: logs.nann == true\n",
     "observed_when: unknown fact 'logs.nann'"),
    ("contradicted_when is unsafe", "summary: The training loss turns into NaN or Inf.\n",
     "summary: The training loss turns into NaN or Inf.\ncontradicted_when: [__import__('os')]\n", "is not allowed"),
    ("observed_when is no expression", "summary: The training loss turns into NaN or Inf.\n",
     "summary: The training loss turns into NaN or Inf.\nobserved_when: 3\n",
     "observed_when: expected an expression over facts, or a list of them"),
    ("defined_when reads an unknown fact", "description: NaN within the first 100 steps.}",
     "description: NaN within the first 100 steps., defined_when: logs.nope == true}",
     "nanloss.early.defined_when: unknown fact 'logs.nope'"),
    ("as_text rule of a fact without text rules", "description: NaN within the first 100 steps.}",
     "description: NaN within the first 100 steps., keys: [{keys: [nan_early], as_text: true}]}",
     "nanloss.early.keys: an as_text rule reads values with the fact's own text rules"),
    ("report phrase longer than a phrase", "    fixes: [fix-lower-lr]\n",
     "    fixes: [fix-lower-lr]\n    reported_as: [{text: '" + "loss goes nan " * 20 + "', sources: ['https://github.com/a/b/issues/1']}]\n",
     "nan-loss.lr-too-high.reported_as[0]: 280 characters: a report phrase is at most 200"),
    ("report phrase citing no public link", "    fixes: [fix-lower-lr]\n",
     "    fixes: [fix-lower-lr]\n    reported_as: [{text: loss nan at step 300, sources: [our notes]}]\n",
     "'our notes' is not a public link"),
    ("report phrase without sources", "    fixes: [fix-lower-lr]\n",
     "    fixes: [fix-lower-lr]\n    reported_as: [{text: loss nan at step 300}]\n",
     "reported_as[0]: missing required field 'sources'"),
    ("same_fault naming no cause", "    prior: 0.2\n", "    prior: 0.2\n    same_fault: [loss-spike.nope]\n",
     "nan-loss.lr-too-high.same_fault: unknown cause 'loss-spike.nope'"),
    ("same_fault naming a sibling", "    prior: 0.2\n", "    prior: 0.2\n    same_fault: [nan-loss.invalid-mask]\n",
     "'nan-loss.invalid-mask' is a sibling under the same symptom"),
    ("risk reading an unknown fact", "    prior: 0.2\n", "    prior: 0.2\n    risk: {when: train.precison == 'fp16', says: fp16}\n",
     "nan-loss.lr-too-high.risk.when: unknown fact 'train.precison'"),
    ("risk without says", "    prior: 0.2\n", "    prior: 0.2\n    risk: {when: data.mask.binary == false}\n",
     "risk: missing required field 'says'"),
    ("probe hint nothing answers", "    ask: Did the NaN appear within the first 100 steps?\n",
     "    ask: Did the NaN appear within the first 100 steps?\n    probe: llmfix probe train.log\n",
     "rules/nan-loss.yaml:14: checks[1].probe: no probe publishes 'nanloss.early'"),
]


@pytest.mark.parametrize("old, new, expected", [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_broken_rule_file(mini_root, old, new, expected):
    mutate(mini_root, old, new)
    if "after: data.mask.binary" in new:  # a cycle needs both directions
        mutate(mini_root, "    cost: 1\n", "    cost: 1\n    after: nanloss.early\n")
    problems = new_problems(mini_root)
    assert any(expected in p for p in problems), "\n".join(problems)


def test_an_item_that_only_confirms_may_repeat_a_counted_condition(mini_root):
    """Ratio 1 both ways: it moves nothing, so it counts nothing twice; with a ratio it would."""
    confirm_only = ("    evidence:\n      - when: data.mask.binary == false and nanloss.early == true\n"
                    "        lr: 1\n        confirms: true\n      - when: data.mask.binary == false\n")
    mutate(mini_root, "    evidence:\n      - when: data.mask.binary == false\n", confirm_only)
    assert not [p for p in new_problems(mini_root) if "counted twice" in p]
    mutate(mini_root, "        lr: 1\n        confirms: true\n", "        lr: 2\n        confirms: true\n")
    assert [p for p in new_problems(mini_root) if "counted twice" in p]


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
    assert any("fact 'weights.nonfinite' is published by weights and gradflow and incident but has no merge rule" in p
               for p in new_problems(mini_root))


def test_article_citing_a_seed_file(mini_root):
    mutate(mini_root, "## References\n", "## References\n\n- Seed 002_2969b0ea5896ed69.txt (BLOOM chronicles)\n",
           Path("kb/nan-loss.md"))
    assert any("cites '002_2969b0ea5896ed69.txt', which users cannot open" in p for p in new_problems(mini_root))
