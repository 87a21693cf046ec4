"""Shared fixtures: the shipped knowledge and a minimal knowledge tree for engine/lint tests."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(TESTS))  # test helper modules (factories) import as top-level modules


def pytest_configure(config):
    """Keep the parse cache of the many tmp knowledge trees out of the user's ~/.cache."""
    import tempfile

    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="llmfix-test-cache-")


@pytest.fixture
def mini_root(tmp_path: Path) -> Path:
    """A writable copy of tests/fixtures/mini (one symptom, two causes, one article)."""
    root = tmp_path / "mini"
    shutil.copytree(TESTS / "fixtures" / "mini", root)
    return root


@pytest.fixture(scope="session")
def shipped_kb():
    from troubleshoot.knowledge import load

    return load()


@pytest.fixture(scope="session")
def art(tmp_path_factory):
    """A healthy checkpoint built once per session: art("gpt2-safetensors") (see ckptfactory)."""
    import ckptfactory

    return lambda name: ckptfactory.get(name, tmp_path_factory)


@pytest.fixture(scope="session")
def fresh(tmp_path_factory):
    """A private copy of a healthy checkpoint, to break: fresh("gpt2-safetensors")."""
    import ckptfactory

    return lambda name: ckptfactory.copy(ckptfactory.get(name, tmp_path_factory), tmp_path_factory, name)
