"""Knowledge trees written carelessly or with hostile intent: never a traceback, a hang or a
blow-up; each problem is one line naming the file (docs/resource-policy.md)."""
from __future__ import annotations

import copy
import marshal
import os
import resource
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from troubleshoot.cli import main
from troubleshoot.knowledge import cache, loading
from troubleshoot.knowledge.expr import Expr, ExprError, render_template

RULES = "rules/nan-loss.yaml"
FACTS = "rules/_facts/core.yaml"
BAD_VALUES = [5, "x", [], {}, None, -3, float("inf"), 10 ** 400, [[[[1]]]], {"a": 1}, True,
              "9 ** 9 ** 9", "'a' * 10**10", "{{ 1 :>2000000000 }}"]


def run_cli(root: Path, *args: str):
    os.environ["LLMFIX_KNOWLEDGE"] = str(root)
    loading.load.cache_clear()
    try:
        return CliRunner().invoke(main, list(args))
    finally:
        del os.environ["LLMFIX_KNOWLEDGE"]
        loading.load.cache_clear()


def assert_clean(result) -> None:
    """Exit 0/1/2, no exception escaped, and an exit 2 is one line."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 1, 2), result.output
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert len(result.output.strip().splitlines()) == 1, result.output


def paths(node, path=()):
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from paths(value, path + (i,))


def replaced(data, path, value):
    if not path:
        return value
    data = copy.deepcopy(data)
    cur = data
    for part in path[:-1]:
        cur = cur[part]
    cur[path[-1]] = value
    return data


def mutations():
    """Every field of the mini tree's rule and fact files, replaced by every bad value."""
    here = Path(__file__).parent / "fixtures" / "mini"
    for name in (RULES, FACTS):
        data = yaml.safe_load((here / name).read_text())
        for path in paths(data):
            for value in BAD_VALUES:
                yield name, path, value


CASES = list(mutations())


@pytest.mark.parametrize("chunk", range(8))
def test_every_field_with_every_bad_value(mini_root, chunk):
    original = {name: yaml.safe_load((mini_root / name).read_text()) for name in (RULES, FACTS)}
    for name, path, value in CASES[chunk::8]:
        (mini_root / name).write_text(yaml.safe_dump(replaced(original[name], path, value), allow_unicode=True))
        for args in (("kb", "lint"), ("ask", "--no-input", "--json", "loss is nan", "-a", "train.lr=1e-3")):
            result = run_cli(mini_root, *args)
            assert_clean(result)
        (mini_root / name).write_text(yaml.safe_dump(original[name], allow_unicode=True))


def limited_memory(mib: int):
    """Cap this process's address space for one block (a blow-up raises MemoryError instead)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)

    class _Cap:
        def __enter__(self):
            used = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
            resource.setrlimit(resource.RLIMIT_AS, (used + mib * 2 ** 20, hard))

        def __exit__(self, *exc):
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))

    return _Cap()


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9))


@pytest.mark.parametrize("text, message", [
    (BOMB, "anchors and aliases"),
    ("id: nan-loss\nid: nan-loss\n", "duplicate key 'id'"),
    ("a:\n" + "".join("  " * i + "- \n" for i in range(1, 40)), "nested deeper"),
    ("[" * 5000 + "]" * 5000, ""),
    ("id: nan-loss\ncost: 1" + "0" * 5000 + "\n", "number too long"),
    ("id: nan-loss\ntitle: 2001-13-45\n", "unreadable value"),
])
def test_hostile_yaml_is_one_problem(mini_root, text, message):
    (mini_root / RULES).write_text(text)
    start = time.monotonic()
    with limited_memory(300):
        result = run_cli(mini_root, "kb", "lint")
    assert time.monotonic() - start < 10
    assert_clean(result)
    assert result.exit_code == 1 and "rules/nan-loss.yaml" in result.output and message in result.output


def test_files_that_are_not_regular_never_block(mini_root, tmp_path):
    os.mkfifo(mini_root / "rules" / "fifo.yaml")
    (mini_root / "rules" / "zero.yaml").symlink_to("/dev/zero")
    (mini_root / "kb" / "folder.md").mkdir()
    (mini_root / "kb" / "latin1.md").write_bytes("---\nid: latin1\ntitle: caf\xe9\n---\n".encode("latin-1"))
    (mini_root / "rules" / "dangling.yaml").symlink_to(tmp_path / "gone.yaml")
    start = time.monotonic()
    result = run_cli(mini_root, "kb", "lint")
    assert time.monotonic() - start < 10
    assert_clean(result)
    for name, why in [("fifo.yaml", "not a regular file"), ("zero.yaml", "not a regular file"),
                      ("folder.md", "is a directory"), ("latin1.md", "not UTF-8"), ("dangling.yaml", "no such file")]:
        assert any(name in line and why in line for line in result.output.splitlines()), (name, result.output)


def test_front_matter_error_is_one_line(mini_root):
    article = mini_root / "kb" / "nan-loss.md"
    article.write_text(article.read_text().replace("title:", "title: [unclosed", 1))
    result = run_cli(mini_root, "kb", "lint")
    lines = [line for line in result.output.splitlines() if line.startswith("kb/nan-loss.md")]
    assert result.exit_code == 1 and len(lines) == 1 and "YAML syntax error" in lines[0]


def test_bad_knowledge_root_is_one_line(tmp_path):
    result = run_cli(tmp_path / "nothing", "kb", "lint")
    assert result.exit_code == 2 and "LLMFIX_KNOWLEDGE" in result.output
    assert_clean(result)


def test_cache_follows_content_not_size_and_mtime(mini_root):
    rules = mini_root / RULES
    assert run_cli(mini_root, "kb", "show", "nan-loss.lr-too-high").exit_code == 0
    stat = rules.stat()
    text = rules.read_text()
    edited = text.replace("title: Learning rate too high", "title: Learning rate too HIGH")
    assert len(edited) == len(text)
    rules.write_text(edited)
    os.utime(rules, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert "too HIGH" in run_cli(mini_root, "kb", "show", "nan-loss.lr-too-high").output


@pytest.mark.parametrize("content", [b'{"key": 5, "files": []}', b"x" * 100, b"", marshal.dumps([1, 2]),
                                     marshal.dumps({"key": None}), marshal.dumps({"key": 5, "files": [], "kb": {}}),
                                     marshal.dumps(compile("raise SystemExit(3)", "cache", "exec"))])
def test_cache_files_of_the_wrong_shape_are_ignored(mini_root, content):
    expected = run_cli(mini_root, "ask", "--no-input", "--json", "loss is nan")
    files = list(cache.cache_dir().glob(f"*{cache.SUFFIX}"))
    assert {f.name.split("-")[0] for f in files} >= {"parsed", "knowledge", "matcher", "patterns"}
    for cached in files:
        cached.write_bytes(content)
    result = run_cli(mini_root, "ask", "--no-input", "--json", "loss is nan")
    assert_clean(result)
    assert result.output == expected.output and result.exit_code == expected.exit_code


def test_cache_files_with_the_right_key_and_a_damaged_body_are_rebuilt(mini_root):
    expected = run_cli(mini_root, "ask", "--no-input", "--json", "loss is nan")
    keyed = 0
    for cached in cache.cache_dir().glob(f"*{cache.SUFFIX}"):
        saved = marshal.loads(cached.read_bytes())
        if isinstance(saved, dict) and "key" in saved:
            cached.write_bytes(marshal.dumps({"key": saved["key"], "files": {"x": 5}, "kb": {"symptoms": [[1, 2]]}}))
            keyed += 1
    assert keyed >= 2  # the parse cache and the knowledge snapshot
    result = run_cli(mini_root, "ask", "--no-input", "--json", "loss is nan")
    assert result.output == expected.output and result.exit_code == expected.exit_code


def test_cache_is_pruned(mini_root, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    rules = mini_root / RULES
    for i in range(3 * cache.KEEP_CACHE_FILES):
        rules.write_text(rules.read_text().replace("title: Loss becomes NaN", f"title: Loss becomes NaN {i}", 1)
                         if i == 0 else rules.read_text().replace(f"NaN {i - 1}", f"NaN {i}", 1))
        assert run_cli(mini_root, "ask", "--no-input", "loss is nan").exit_code in (0, 1)
    for kind in ("parsed", "knowledge", "matcher"):
        assert len(list((tmp_path / "cache" / "llmfix").glob(f"{kind}-*{cache.SUFFIX}"))) <= cache.KEEP_CACHE_FILES


@pytest.mark.parametrize("source", ["9 ** 9 ** 9", "'a' * 10**10", "[1] * 10**9", "10 ** 400 * 10",
                                    "'%999999999d' % 1", "2 ** 10000000",
                                    # nesting the parser or the checker cannot hold (MemoryError, RecursionError)
                                    "-" * 100_000 + "1", "not " * 100_000 + "a", "1" + " ** 1" * 2000,
                                    "a if a else " * 5000 + "1", "x\x00"])
def test_hostile_expressions_fail_fast(source):
    start = time.monotonic()
    with pytest.raises(ExprError):
        Expr(source).evaluate({})
    assert time.monotonic() - start < 1


def test_format_widths_are_bounded():
    with pytest.raises(ExprError):
        render_template("x {{ 1 :>2000000000 }}", {})
    assert render_template("x {{ 1/3 :.3f }}", {})[0] == "x 0.333"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet="0123456789.+-*/()% ablrxyz_'\"<>=!", max_size=40))
def test_any_expression_parses_or_says_why(source):
    """Random expressions over the whitelist: a value, Unknown, or ExprError; nothing else."""
    from troubleshoot.knowledge.expr import Unknown

    try:
        Expr(source).evaluate({"a": 2, "b": 3.5})
    except (ExprError, Unknown):
        pass


@pytest.mark.parametrize("answer, message", [
    ("train.lr=" + "9" * 4000, "too long"),
    ("train.lr=1e999", "finite number"),
    ("train.lr=nan", "expects a number"),
])
def test_hostile_answers_are_one_line(answer, message):
    result = CliRunner().invoke(main, ["ask", "--no-input", "loss went nan", "--answer", answer])
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1 and len(result.output) < 400
