"""CI runs the README's test command verbatim, after the lint step."""
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_command_after_the_lint():
    command = next(line.strip() for line in (REPO / "README.md").read_text().splitlines()
                   if "python -m pytest" in line and line.startswith("    "))
    ci = (REPO / ".ci" / "run").read_text()
    assert command in ci
    assert ci.index("ruff check .") < ci.index(command) and ci.index("shellcheck .ci/run") < ci.index(command)
