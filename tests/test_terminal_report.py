"""The terminal report: answer first, short, wrapped, each fix once, readable colours, --fail-on."""
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from troubleshoot import cli
from troubleshoot.diagnosis import Diagnosis, RankedCause, RenderedFix
from troubleshoot.report.terminal import SEVERITY_STYLE, STATUS_STYLE, hang, render

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(*args, columns=100, color=False):
    return CliRunner(env={"COLUMNS": str(columns)}).invoke(cli.main, list(args), color=color)


def fix_blocks(text: str) -> list[str]:
    """The titles of the fixes printed in full (a reference says 'printed above')."""
    return [line.split("fix:", 1)[1].strip() for line in text.splitlines()
            if line.strip().startswith("fix:") and "printed above" not in line]


def test_loss_went_nan_fits_40_lines_and_leads_with_the_ranking():
    out = run("ask", "--no-input", "loss went nan").output
    lines = out.splitlines()
    assert len(lines) <= 40, out
    assert all(len(line) <= 100 for line in lines), [line for line in lines if len(line) > 100]
    ranking, questions = out.index("1. [untested"), out.index("Questions that would sharpen this")
    assert ranking < questions, "the next questions come right after the ranking"
    assert "--answer data.mask.binary=yes|no" in out
    assert not fix_blocks(out), "no cause is likely: no fix steps yet"


def test_every_fix_is_printed_once_even_with_all_fixes():
    """Lowering the LR and clipping serve two nan-loss causes each: full once, then referenced."""
    out = run("ask", "--no-input", "--fixes", "loss went nan").output
    titles = fix_blocks(out)
    assert len(titles) == len(set(titles)) and len(titles) >= 3, titles
    assert "printed above, under 1" in out
    steps = [line.strip() for line in out.splitlines() if line.strip().startswith("- ")]
    assert len(steps) == len(set(steps))


def test_confirmed_cause_gets_its_fix_and_the_strongest_evidence():
    out = run("ask", "--no-input", "loss went nan", "-a", "data.mask.binary=no").output
    first = out[out.index("1. [confirmed"):]
    assert "nan-loss.invalid-mask" in first.splitlines()[0] + first.splitlines()[1]
    assert "data.mask.binary = False, from user" in first  # the strongest evidence under its line
    assert fix_blocks(out) and "why: prior" in out
    assert out.index("What to do") > out.index("1. [confirmed")


def test_example_probe_leads_with_the_answer():
    result = run("probe", str(EXAMPLES / "train.log"), str(EXAMPLES / "batch.jsonl"))
    out = result.output
    assert result.exit_code == 1  # error findings in the batch
    assert out.index("Causes, most likely first") < out.index("What to do") < out.index("Findings")
    assert out.splitlines()[0].startswith("Symptom:")
    titles = fix_blocks(out)
    assert len(titles) == len(set(titles))


@pytest.mark.parametrize("columns", [60, 80, 140])
def test_wraps_to_the_terminal_width_with_hanging_indents(columns):
    out = run("ask", "--no-input", "--fixes", "loss went nan", columns=columns).output
    long = [line for line in out.splitlines()
            if len(line) > columns and not re.search(rf"\S{{{columns // 3},}}", line)]
    assert not long, long  # only an unbreakable word (a URL) may overflow
    step_continuations = [line for line in out.splitlines() if re.match(r" {9}\S", line)]
    assert step_continuations or columns == 140, "continuations hang under the step text"


def test_hang_keeps_styles_out_of_the_width():
    styled = "\x1b[1mbold\x1b[0m " * 10
    lines = hang("  - ", styled, 24)
    assert all(len(re.sub(r"\x1b\[[0-9;]*m", "", line)) <= 24 for line in lines)
    assert all(line.startswith("    ") for line in lines[1:])


def test_no_white_text_and_no_colour_without_a_terminal():
    styles = list(STATUS_STYLE.values()) + list(SEVERITY_STYLE.values())
    assert all(s.get("fg") not in ("white", "bright_white", "black") for s in styles)
    coloured = run("ask", "--no-input", "loss went nan", color=True).output
    assert "\x1b[" in coloured and "\x1b[37m" not in coloured and "\x1b[97m" not in coloured
    assert "\x1b[" not in run("ask", "--no-input", "loss went nan").output


def test_no_color_environment_is_honoured():
    result = CliRunner(env={"NO_COLOR": "1", "COLUMNS": "100"}).invoke(
        cli.main, ["ask", "--no-input", "loss went nan"], color=True)
    assert "\x1b[" not in result.output


def test_json_stays_complete():
    """The terminal shows one fix per cause; the JSON keeps every fix and every question."""
    data = json.loads(run("ask", "--no-input", "--json", "loss went nan").output)
    assert any(len(c["fixes"]) > 1 for c in data["causes"])
    terminal = run("ask", "--no-input", "loss went nan").output
    assert len(data["questions"]) > terminal.count("--answer "), "the terminal shows the first questions only"
    assert len(data["causes"]) > terminal.count(". [untested")


def cause(status, score, fixes=()):
    return RankedCause(f"s.{status}", "s", f"{status} cause", score, status, 0.1,
                       fixes=[RenderedFix(f, f"fix {f}", [f"step of {f}"], ["https://example.org"]) for f in fixes])


def test_render_prints_a_shared_fix_once():
    diag = Diagnosis(causes=[cause("confirmed", 0.9, ["a", "b"]), cause("likely", 0.6, ["a"])])
    out = render(diag, width=100, fixes_per_cause=2)
    assert out.count("step of a") == 1 and "fix a (printed above, under 1)" in out


@pytest.mark.parametrize("fail_on, findings, status, code", [
    ("error", [], "likely", 0), ("warning", [], "likely", 1), ("never", [], "confirmed", 0),
    ("error", ["warning"], "possible", 0), ("warning", ["warning"], "possible", 1),
    ("error", ["error"], "possible", 1), ("never", ["error"], "possible", 0),
])
def test_fail_on_threshold(fail_on, findings, status, code):
    from troubleshoot.observations import Finding

    diag = Diagnosis(causes=[cause(status, 0.5)], findings=[Finding("x", sev, "m") for sev in findings])
    assert cli.exit_code(diag, fail_on) == code


def test_fail_on_through_the_command_line():
    log, batch = str(EXAMPLES / "train.log"), str(EXAMPLES / "batch.jsonl")
    assert run("probe", log, batch).exit_code == 1
    assert run("probe", log, batch, "--fail-on", "never").exit_code == 0
    assert run("probe", log, "--fail-on", "warning").exit_code == 1  # the spike's warnings
    assert run("probe", log).exit_code == 0
    assert run("ask", "--no-input", "loss went nan", "--fail-on", "bogus").exit_code == 2


def test_slow_probe_phases_go_to_stderr_with_elapsed_time(art, monkeypatch):
    """A real tiny GPT-2 folder: building, gradient flow and mask invariants each report their time
    on a terminal's stderr; --json stdout stays one JSON object."""
    monkeypatch.setattr(cli, "stderr_is_tty", lambda: True)
    result = CliRunner().invoke(cli.main, ["probe", "--json", "--device", "cpu", str(art("gpt2-safetensors"))])
    assert result.exit_code in (0, 1), result.output
    json.loads(result.stdout)
    for phase in ("building the model", "gradient flow", "mask invariants"):
        assert re.search(rf"{phase} \.\.\. \d+\.\d s\n", result.stderr), result.stderr
    assert "gradient flow" not in result.stdout


def test_phases_are_silent_off_a_terminal(art):
    result = CliRunner().invoke(cli.main, ["probe", "--device", "cpu", str(art("gpt2-safetensors"))])
    assert "building the model" not in result.stderr + result.stdout


def test_probe_context_phase_reports_start_and_end():
    from troubleshoot.probes.context import ProbeContext

    seen = []
    ctx = ProbeContext([], on_phase=lambda name, elapsed: seen.append((name, elapsed)))
    with pytest.raises(ValueError), ctx.phase("gradient flow"):
        raise ValueError("the end is reported even when the step fails")
    assert seen[0] == ("gradient flow", None) and seen[1][0] == "gradient flow" and seen[1][1] >= 0
