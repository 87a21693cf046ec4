"""`llmfix kb list | show` in the terminal: computed templates, rendered Markdown, did-you-mean."""
import click
import pytest
from click.testing import CliRunner

from troubleshoot import cli
from troubleshoot.report.markdown import to_terminal


def run(*args):
    return CliRunner(env={"COLUMNS": "100"}).invoke(cli.main, list(args))


def test_kb_show_computes_the_init_std_from_an_answer():
    out = run("kb", "show", "fix-bad-init-formula-std", "--answer", "model.hidden_size=11600").output
    assert "--init-method-std 0.00587" in out and "{{" not in out and "<HIDDEN_SIZE>" not in out


def test_kb_show_without_the_answer_says_which_answer_computes_it():
    out = run("kb", "show", "fix-bad-init-formula-std").output
    assert "{{" not in out and "<HIDDEN_SIZE>" in out
    assert "--answer model.hidden_size=VALUE" in out


def test_kb_show_renders_the_article_markdown():
    out = run("kb", "show", "nan-loss").output
    assert "## " not in out and "**" not in out and "{{" not in out
    assert "What you see" in out and "(https://github.com/liguodongiot/llm-action)" in out  # link as text
    assert all(len(line) <= 100 or " " not in line.strip() or "    " in line[:4] for line in out.splitlines())


def test_markdown_renderer_lists_code_links_and_no_html():
    text = ("# Title\n\nSome *emphasis* and [a link](https://example.org/x).\n\n"
            "- first item that is long enough to wrap around the narrow width used here\n- second\n\n"
            "1. one\n2. two\n\n```\ncode  stays   as written\n```\n\n<script>alert(1)</script>\n")
    out = to_terminal(text, 40)
    lines = out.splitlines()
    assert click.unstyle(lines[0]) == "Title"
    assert "a link (https://example.org/x)." in " ".join(out.split())
    bullet = next(i for i, line in enumerate(lines) if line.startswith("-  first"))
    assert lines[bullet + 1].startswith("   ") and all(len(line) <= 40 for line in lines[bullet:bullet + 3])
    assert "1. one" in out and "2. two" in out
    assert "    code  stays   as written" in out
    assert "<script>alert(1)</script>" in out  # shown as the text it is, never interpreted


def test_kb_list_facts():
    out = run("kb", "list", "--facts").output
    assert "model.hidden_size  (number" in out and "data.mask.binary  (yes|no)" in out
    assert "train.precision  (fp16|bf16|fp32)" in out


@pytest.mark.parametrize("args, message", [
    (["kb", "show", "fix-bad-init-formla-std"], "Did you mean 'fix-bad-init-formula-std'?"),
    (["kb", "show", "nan-los"], "Did you mean 'nan-loss'?"),
    (["ask", "--no-input", "x", "-a", "train.precison=bf16"], "Did you mean 'train.precision'?"),
    (["ask", "--no-input", "x", "-a", "train.precision=bf61"], "Did you mean 'bf16'?"),
    (["probe", "--device", "gpu", "x"], "Did you mean 'cpu'?"),
    (["ask", "--fail-on", "warnings", "x"], "Did you mean 'warning'?"),
    (["ask", "--fixs", "x"], "Did you mean '--fixes'?"),
    (["kb", "shw", "x"], "Did you mean 'show'?"),
    (["kb", "show", "nan-loss", "-a", "bogus"], "expected FACT=VALUE"),
])
def test_bad_arguments_get_one_line_with_a_suggestion(args, message):
    result = run(*args)
    assert result.exit_code == 2 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
