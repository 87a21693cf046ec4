"""The warm start (knowledge/snapshot.py, Expr.from_compiled, __main__.run) answers exactly as the
full read does: every field survives the snapshot, every expression shortcut agrees with walking
the tree, and `ask` prints the same bytes either way."""
from __future__ import annotations

import dataclasses
import marshal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from troubleshoot import cli
from troubleshoot.knowledge import knowledge_root, load, snapshot
from troubleshoot.knowledge.expr import Expr, ExprError, Unknown
from troubleshoot.knowledge.model import KnowledgeBase
from troubleshoot.knowledge.read import load_with_problems

REPO = Path(__file__).resolve().parents[1]
QUERIES = [
    ["loss went nan"], ["loss is nan after warmup with fp16, lr=3e-4"], ["模型输出重复"], ["训练时loss变成nan"],
    ["loss spikes at step 12000 then diverges"], ["NCCL timeout on rank 3 after 30 minutes"],
    ["RuntimeError: CUDA error: device-side assert triggered\nAssertion `srcIndex < srcSelectDimSize` failed."],
    ["Traceback (most recent call last):\n  File \"train.py\", line 10, in <module>\n    loss.backward()\n"
     "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn"],
    ["loss is exactly 0 from the first step, grad_norm nan"], ["how do I bake bread"],
    ["-a", "train.lr=0.001", "-a", "model.hidden_size=4096", "loss went nan"],
    ["--top", "10", "overflwo in fp16 nccl timout"],
]


def shape(value):
    """A comparable dump that keeps types: a list of dataclasses never equals a list of lists."""
    if isinstance(value, Expr):
        return ("Expr", value.source, sorted(value.facts))
    if dataclasses.is_dataclass(value) or isinstance(value, tuple) and hasattr(value, "_fields"):
        items = value._asdict().items() if isinstance(value, tuple) else vars(value).items()
        return (type(value).__name__, {k: shape(v) for k, v in items if not k.startswith("_")})
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [shape(v) for v in value])
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    return (type(value).__name__, value)


def outcome(expr: Expr, facts: dict):
    try:
        return ("value", expr.evaluate(facts))
    except (Unknown, ExprError) as err:
        return (type(err).__name__, err.args)


def test_every_table_of_the_knowledge_base_is_stored():
    stored = set(snapshot.TABLES) | {"causes", "fingerprint"}
    assert stored == {f.name for f in dataclasses.fields(KnowledgeBase)}


def test_the_snapshot_holds_every_field_of_the_full_read():
    full, problems = load_with_problems(knowledge_root())
    assert not problems
    rebuilt = snapshot.decode(marshal.loads(marshal.dumps(snapshot.encode(full))))
    assert shape(rebuilt) == shape(full)
    assert all(rebuilt.causes[c.id] is c for s in rebuilt.symptoms.values() for c in s.causes)


def test_expression_shortcuts_agree_with_walking_the_tree():
    full, _ = load_with_problems(knowledge_root())
    exprs = [ev.when for c in full.causes.values() for ev in c.evidence]
    exprs += [e for s in full.symptoms.values() for e in s.observed_when + s.contradicted_when]
    exprs += [Expr(source) for source in ("false and a.b", "1 < 2 or a.b", "a.b or c.d", "a.b in ['x', 'y']",
                                          "min(a.b, 3) > 1", "sqrt(-1) > a.b", "true")]
    shortcut = 0
    for expr in exprs:
        compiled = Expr.from_compiled(*expr.compiled())
        shortcut += compiled.stops_at is not None
        for facts in ({}, {"no.such_fact": 1.0}, dict.fromkeys(expr.facts), {n: 1 for n in expr.facts},
                      {n: "fp16" for n in expr.facts}):
            assert outcome(compiled, facts) == outcome(Expr(expr.source), facts), (expr.source, facts)
    assert shortcut > len(exprs) / 2, "most conditions stop at an unknown fact"


def test_a_condition_that_decides_without_facts_is_never_short_cut():
    assert Expr("false and a.b").compiled()[2] is None
    assert Expr("a.b or c.d").compiled() == ["a.b or c.d", ["a.b", "c.d"], "a.b"]


@pytest.mark.parametrize("args", QUERIES, ids=lambda a: a[-1][:30])
def test_ask_prints_the_same_from_the_snapshot_as_from_a_full_read(args, monkeypatch):
    def ask():
        load.cache_clear()
        return CliRunner().invoke(cli.main, ["ask", "--no-input", "--json", *args])

    ask()  # writes the snapshot
    warm = ask()
    monkeypatch.setattr(snapshot, "read", lambda root, stamps: None)
    full = ask()
    load.cache_clear()
    assert warm.exit_code == full.exit_code and warm.output == full.output
    assert '"schema": "llmfix/diagnosis-v1"' in warm.output


def test_the_console_script_keeps_exit_codes_and_output():
    def llmfix(*args: str, code: str = "from troubleshoot.__main__ import run; run()"):
        return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True)

    ok = llmfix("ask", "--no-input", "--json", "loss went nan")
    assert ok.returncode == 0 and ok.stdout.rstrip().endswith("}") and '"nan-loss"' in ok.stdout
    bad = llmfix("kb", "show", "no-such-id")
    assert bad.returncode == 2 and bad.stderr.startswith("Error: unknown id") and bad.stderr.count("\n") == 1
    handler = ("import atexit, sys; atexit.register(lambda: sys.stderr.write('handler ran'))\n"
               "from troubleshoot.__main__ import run; run()")
    waited = llmfix("kb", "show", "no-such-id", code=handler)
    assert waited.returncode == 2 and waited.stderr.endswith("handler ran"), "exit handlers still run"
