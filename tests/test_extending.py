"""docs/extending.md, "Add a log format", walked through with a toy format.

The test touches only what the doc lists: a reader and one ``LogFormat`` registered in the table.
Detection, the artifact's ``format``, the log probe's findings and facts, and the timeline then
work without any other change.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from troubleshoot.loaders import detect
from troubleshoot.loaders.logs import formats
from troubleshoot.loaders.logs.record import Record, to_float
from troubleshoot.loaders.logs.text import iter_lines
from troubleshoot.probes import ProbeContext, run_all
from troubleshoot.report.timeline import timeline_lines

TOY_LINE = re.compile(r"^TOY step=(\d+) loss=(\S+) lr=(\S+)$")


def toy_records(path: Path) -> Iterator[Record]:
    """Step 1 of the doc: a streaming reader."""
    for lineno, line in iter_lines(path):
        m = TOY_LINE.match(line)
        if m:
            yield Record("train", int(m.group(1)), to_float(m.group(2)), to_float(m.group(3)), line=lineno)


TOY = formats.LogFormat("toy", "toy trainer log", toy_records, line=lambda s: TOY_LINE.match(s) is not None,
                        decisive=True)


@pytest.fixture
def toy_registered(monkeypatch):
    """Step 2 of the doc: one row in the table (removed again after the test)."""
    monkeypatch.setattr(formats, "FORMATS", list(formats.FORMATS))
    formats.register(TOY)
    return TOY


def write_toy_log(path: Path, spike_at: int | None = None) -> Path:
    lines = ["toy trainer 0.1 starting"]
    for step in range(1, 601):
        loss = 4.0 * math.exp(-step / 300) + 2.0 + 0.01 * math.sin(step)
        if spike_at is not None and step >= spike_at:
            loss *= 3.0  # a spike that never recovers
        lines.append(f"TOY step={step} loss={loss:.4f} lr={min(1.0, step / 100) * 3e-4:.3g}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_registered_format_is_detected_read_and_probed(tmp_path, toy_registered):
    path = write_toy_log(tmp_path / "run.out", spike_at=450)
    artifact = detect(path)
    assert (artifact.kind, artifact.format, artifact.detail) == ("log", "toy", "toy trainer log")
    assert artifact.to_json()["format"] == "toy"
    obs = run_all(ProbeContext([artifact], static=True))
    summary = next(f for f in obs.findings if f.id == "logs.summary")
    assert summary.value["format"] == "toy" and summary.value["records"] == 600
    assert "toy trainer log" in summary.message
    spikes = [f for f in obs.findings if f.id in ("logs.spike", "logs.divergence") and f.severity == "error"]
    assert spikes and obs.facts["logs.spike"].value is True
    assert 440 <= obs.facts["logs.instability_onset"].value <= 451
    assert not [f for f in obs.findings if f.id == "probe.crashed"]
    assert any("run.out" in line for line in timeline_lines(obs.attachments))


def test_without_the_row_the_file_is_not_a_toy_log(tmp_path):
    path = write_toy_log(tmp_path / "run.out")
    assert "toy" not in {f.name for f in formats.FORMATS}
    assert detect(path).format == "text"  # a log-like name: the catch-all reads its error lines only


def test_kb_new_writes_a_symptom_that_loads_and_lint_lists_what_is_left(mini_root):
    from click.testing import CliRunner

    from troubleshoot import cli
    from troubleshoot.knowledge.lint import lint
    from troubleshoot.knowledge.read import load_with_problems

    result = CliRunner().invoke(cli.main, ["kb", "new", "grad-stall", "--root", str(mini_root)])
    assert result.exit_code == 0, result.output
    kb, problems = load_with_problems(mini_root)
    assert problems == [] and "grad-stall.todo-cause" in kb.causes
    left = [str(p) for p in lint(mini_root) if "grad-stall" in str(p)]
    assert left == ["rules/grad-stall.yaml:16: grad-stall.todo-cause: cause has no sources",
                    "rules/grad-stall.yaml:27: fix-grad-stall-todo: fix has no sources"], left
    again = CliRunner().invoke(cli.main, ["kb", "new", "grad-stall", "--root", str(mini_root)])
    assert again.exit_code == 2 and "already exists" in again.output
    bad = CliRunner().invoke(cli.main, ["kb", "new", "Grad_Stall", "--root", str(mini_root)])
    assert bad.exit_code == 2 and "kebab-case" in bad.output
