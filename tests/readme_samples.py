"""The sample output in README.md, generated from the real output.

Each sample is a marked block::

    <!-- sample: ask --no-input "loss went nan" -->
        $ llmfix ask --no-input "loss went nan"
        ...the output, indented...
    <!-- /sample -->

``python tests/readme_samples.py`` runs ``python -m troubleshoot ARGS`` for every block (100
columns, no colour) and rewrites the blocks; tests/test_readme_samples.py fails when they drift.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
BLOCK = re.compile(r"(<!-- sample: (?P<args>.+?) -->\n)(?P<body>.*?)(<!-- /sample -->)", re.S)


def output_of(args: str) -> str:
    """What `llmfix ARGS` prints on stdout in a 100-column terminal without colour."""
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run([sys.executable, "-m", "troubleshoot", *shlex.split(args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"llmfix {args} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def block(args: str) -> str:
    lines = [f"$ llmfix {args}", *output_of(args).rstrip("\n").splitlines()]
    return "\n".join(f"    {line}".rstrip() for line in lines) + "\n"


def regenerate(text: str) -> str:
    """The README with every marked block replaced by the real output of its command."""
    return BLOCK.sub(lambda m: m.group(1) + "\n" + block(m.group("args")) + "\n" + m.group(4), text)


def commands(text: str) -> list[str]:
    return [m.group("args") for m in BLOCK.finditer(text)]


if __name__ == "__main__":
    README.write_text(regenerate(README.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"README.md: {len(commands(README.read_text(encoding='utf-8')))} samples regenerated")
