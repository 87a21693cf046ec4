"""Packaging: the wheel carries rules/ and kb/, and `llmfix ask` works from any directory."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_installs_and_answers_from_another_directory(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(dist)], check=True, capture_output=True)
    wheel = next(dist.glob("llmfix-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    # The dependencies come from the environment running this test (CI's fresh venv, not the system
    # python): its site-packages are listed, after the venv's own, by a .pth file. Plain paths, so
    # the .pth files inside them (an editable install of this repo) are not run. The wheel itself
    # is installed into the venv, offline, and must be the copy that runs.
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_llmfix_test_deps.pth").write_text("\n".join(_site_packages()) + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run([str(py), "-c", "import troubleshoot; print(troubleshoot.__file__)"],
                           cwd=elsewhere, capture_output=True, text=True, check=True).stdout
    assert str(venv) in where, f"the installed wheel is not the copy that runs: {where}"
    result = subprocess.run([str(venv / "bin" / "llmfix"), "ask", "--no-input", "--json", "loss went nan"],
                            cwd=elsewhere, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema"] == "llmfix/diagnosis-v1" and data["symptoms"][0]["id"] == "nan-loss"
    lint = subprocess.run([str(venv / "bin" / "llmfix"), "kb", "lint"], cwd=elsewhere, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    site = subprocess.run([str(venv / "bin" / "llmfix"), "site", "build", "site"], cwd=elsewhere,
                          capture_output=True, text=True)
    assert site.returncode == 0, site.stderr
    assert (elsewhere / "site" / "symptoms" / "nan-loss.html").is_file()
    assert any((elsewhere / "site" / "static").glob("*.js"))
    log = subprocess.run([str(venv / "bin" / "llmfix"), "probe", "--json", str(REPO / "examples" / "train.log")],
                         cwd=elsewhere, capture_output=True, text=True)
    assert log.returncode in (0, 1) and json.loads(log.stdout)["artifacts"][0]["kind"] == "log", log.stderr


def _site_packages() -> list[str]:
    """The site-packages folders of the interpreter running the tests."""
    import site

    return [p for p in site.getsitepackages() + [site.getusersitepackages()] if Path(p).is_dir()]


def imported_by(*args: str) -> set[str]:
    """Every module a command imports (``python -X importtime`` lists each one on stderr)."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "troubleshoot", *args], capture_output=True,
                            text=True, cwd=REPO)
    return {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}


def test_ask_never_imports_torch():
    modules = imported_by("ask", "--no-input", "--json", "loss went nan")
    assert {"troubleshoot.engine", "troubleshoot.matcher"} <= modules, "the listing holds what ask really imports"
    assert not {m for m in modules if m.split(".")[0] == "torch"}


def test_warm_ask_reads_the_snapshot_without_the_yaml_reader():
    imported_by("ask", "--no-input", "--json", "loss went nan")  # the snapshot is written
    modules = imported_by("ask", "--no-input", "--json", "loss went nan")
    assert "troubleshoot.knowledge.snapshot" in modules
    assert not modules & {"yaml", "troubleshoot.knowledge.read", "troubleshoot.knowledge.schema", "hashlib"}
