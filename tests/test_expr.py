"""Safe expressions: what rule files may compute, and what they may never do."""
import math

import pytest

from troubleshoot.knowledge.expr import Expr, ExprError, Unknown, render_template


@pytest.mark.parametrize("source, facts, expected", [
    ("sqrt(2/(5*model.hidden_size))", {"model.hidden_size": 11600}, math.sqrt(2 / 58000)),
    ("data.mask.binary == false", {"data.mask.binary": False}, True),
    ("train.precision in ['fp16', 'bf16']", {"train.precision": "bf16"}, True),
    ("1 < x.y <= 3", {"x.y": 3}, True),
    ("not a.b and (c.d > 2 or c.d < -1)", {"a.b": False, "c.d": -5}, True),
    ("max(a.b, 2) ** 2 % 5", {"a.b": 3}, 4),
])
def test_evaluates(source, facts, expected):
    assert Expr(source).evaluate(facts) == pytest.approx(expected)


@pytest.mark.parametrize("source", [
    "__import__('os').system('true')", "().__class__", "open('x')", "[x for x in y]",
    "lambda: 1", "a.b[0]", "eval('1')", "x.y.__dict__()", "f'{x}'",
])
def test_rejects_anything_outside_the_whitelist(source):
    with pytest.raises(ExprError):
        Expr(source)


def test_reports_the_facts_it_reads_and_unknowns():
    expr = Expr("sqrt(2/(5*model.hidden_size)) / sqrt(2*model.num_layers)")
    assert expr.facts == {"model.hidden_size", "model.num_layers"}
    with pytest.raises(Unknown):
        expr.evaluate({"model.hidden_size": 11600})


def test_template_computes_bloom_init_std_or_names_missing_facts():
    text, missing = render_template("--init-method-std {{ sqrt(2/(5*model.hidden_size)) :.5f }}",
                                    {"model.hidden_size": 11600})
    assert text == "--init-method-std 0.00587" and not missing
    text, missing = render_template("std {{ sqrt(2/(5*model.hidden_size)) :.5f }}", {})
    assert missing == {"model.hidden_size"} and text == "std sqrt(2/(5*<HIDDEN_SIZE>))"


def test_unknown_facts_in_a_command_become_placeholders_never_fact_names():
    """Issue 12 item 5: what a user copies shows <ROLLBACK_ITERATION>, not logs.rollback_iteration."""
    step = ("resume_from_checkpoint='out/checkpoint-{{ logs.rollback_iteration :.0f }}' "
            "--skip-train-iteration-range {{ logs.skip_range }}")
    text, missing = render_template(step, {})
    assert text == ("resume_from_checkpoint='out/checkpoint-<ROLLBACK_ITERATION>' "
                    "--skip-train-iteration-range <SKIP_RANGE>")
    assert missing == {"logs.rollback_iteration", "logs.skip_range"}
    assert "logs." not in text
    text, _ = render_template("--skip-train-iteration-range {{ logs.skip_range }}", {"logs.skip_range": "2771-4040"})
    assert text == "--skip-train-iteration-range 2771-4040"


def test_partly_known_expressions_show_known_values_and_placeholders():
    text, missing = render_template("{{ train.lr*train.new_global_batch_size/train.global_batch_size :.2e }}",
                                    {"train.lr": 3e-4, "train.global_batch_size": 512})
    assert text == "0.0003*<NEW_GLOBAL_BATCH_SIZE>/512" and missing == {"train.new_global_batch_size"}
    text, _ = render_template("{{ train.lr / optimizer.lr }}", {})
    assert text == "<TRAIN_LR> / <OPTIMIZER_LR>"  # two facts would share <LR>: the whole names


def test_no_shipped_fix_step_shows_a_fact_name_when_its_facts_are_unknown(shipped_kb):
    from troubleshoot.knowledge.expr import split_template

    for fix in shipped_kb.fixes.values():
        for step in fix.steps:
            text, missing = render_template(step, {})
            slots = [Expr(src).facts for _, src, _ in split_template(step) if src]
            for name in set().union(*slots) if slots else ():
                assert name in missing and name not in text, f"{fix.id}: {text!r}"


def test_unknown_is_true_only_while_the_fact_has_no_value():
    """``unknown(fact)``: an item that stands in for a more direct fact (AMP for an fp16 run) reads
    it only while that fact is missing, so a report that gives both counts it once."""
    expr = Expr("train.amp_autocast == true and unknown(train.precision)")
    assert expr.facts == {"train.amp_autocast", "train.precision"}
    assert expr.evaluate({"train.amp_autocast": True}) is True
    assert expr.evaluate({"train.amp_autocast": True, "train.precision": "fp16"}) is False
    # a precision given closes the item whatever the AMP fact says (and such items carry no else_lr)
    assert expr.evaluate({"train.precision": "fp16"}) is False
    with pytest.raises(Unknown):
        expr.evaluate({})  # the AMP fact itself is still needed while the precision is missing


@pytest.mark.parametrize("source,facts,value", [
    ("a.x == 1 or b.y == 2", {"b.y": 2}, True),          # decided by the second operand, the first unknown
    ("a.x == 1 or b.y == 2", {"b.y": 3}, None),          # no operand decides, one is unknown
    ("a.x == 1 and b.y == 2", {"b.y": 3}, False),        # a false operand decides an and, wherever it stands
    ("a.x == 1 and b.y == 2", {"a.x": 1}, None),
    ("a.x == 1 and b.y == 2", {"a.x": 1, "b.y": 2}, True),
    ("(a.x == 1 or b.y == 2) and c.z", {"b.y": 2, "c.z": True}, True),
])
def test_and_or_are_three_valued(source, facts, value):
    """Kleene's logic: "the version changed or the old release works" holds once the old release
    is known to work, even while nobody said whether the version changed."""
    assert Expr(source).holds(facts) is value


@pytest.mark.parametrize("source", ["unknown(1)", "unknown(a.b, c.d)", "unknown(true)", "unknown(a.b + 1)"])
def test_unknown_takes_one_fact_name(source):
    with pytest.raises(ExprError):
        Expr(source)
