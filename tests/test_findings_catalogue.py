"""Every finding id the code can report is catalogued in rules/_findings.yaml, and nothing else is."""
from __future__ import annotations

from click.testing import CliRunner

from troubleshoot import cli
from troubleshoot.knowledge.lint import lint
from troubleshoot.knowledge.reported import finding_ids


def test_the_scan_sees_run_time_ids():
    ids = finding_ids()
    # a conditional, a dict of ids, a loop table, a parameter filled by callers, a (id, severity, msg) tuple
    for fid in ("checkpoint.unsafe_pickle_refused", "logs.oom", "config.pad_mismatch", "data.text.escape_rate",
                "forward.skipped", "probe.crashed", "logs.plot_missing"):
        assert fid in ids, fid


def test_every_finding_id_is_catalogued_and_no_entry_is_stale(shipped_kb):
    ids = set(finding_ids())
    assert ids - shipped_kb.findings.keys() == set(), "add these to rules/_findings.yaml"
    assert shipped_kb.findings.keys() - ids == set(), "no code reports these any more"
    assert all(f.title and len(f.explanation) > 40 for f in shipped_kb.findings.values())


def test_lint_names_an_uncatalogued_finding(tmp_path):
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for part in ("rules", "kb"):
        shutil.copytree(root / part, tmp_path / part)
    catalogue = tmp_path / "rules" / "_findings.yaml"
    text = catalogue.read_text()
    start = text.index("data.mask.gaps:")
    catalogue.write_text(text[:start] + text[text.index("data.mask.not_2d:"):])
    problems = [str(p) for p in lint(tmp_path)]
    assert any("data.mask.gaps: finding id reported by troubleshoot/probes/data/batch.py has no entry" in p
               for p in problems), problems


def test_kb_show_a_finding():
    result = CliRunner().invoke(cli.main, ["kb", "show", "data.mask.non_binary"])
    assert result.exit_code == 0 and "attention_mask holds values other than 0 and 1" in result.output
    shared = CliRunner().invoke(cli.main, ["kb", "show", "logs.nan"])  # a fact and a finding
    assert "(yes|no)" in shared.output and "a probe finding" in shared.output  # the fact, then the finding
