"""Inputs the user cannot read, caches and outputs that cannot be written (issue 14), run for real.

Root reads a file of mode 000 anyway, so as root the CLI runs in a child that has dropped the two
capabilities that bypass file modes (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH): from then on the
kernel checks every open against the mode bits exactly as for an ordinary user. (Switching to uid
65534 instead would also work where the interpreter is reachable by that user; here it lives under
/root, mode 0700.) As an ordinary user a plain chmod bites already. The ``unprivileged`` fixture
checks that it does, and skips only when neither is possible.

Expected everywhere: no traceback, an exit status in {0, 1, 2}; exit 2 with one line naming the
file and the problem when the input itself cannot be read; and nothing lost: a readable log beside
an unreadable one still has its NaN found, a run folder whose newest checkpoint is unreadable is
probed at the newest readable one, and ask works without its cache.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import ckptfactory as cf
import pytest

ROOT = Path(__file__).resolve().parent.parent
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, PR_CAPBSET_DROP = 1, 2, 24


def _drop_file_capabilities() -> None:
    """preexec_fn of a root child: remove the capabilities that let root ignore file modes from the
    bounding set, so the exec'd interpreter never has them."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


PREEXEC = _drop_file_capabilities if os.geteuid() == 0 else None


def llmfix(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m troubleshoot ARGS`` in a child that file modes apply to."""
    return subprocess.run([sys.executable, "-m", "troubleshoot", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, preexec_fn=PREEXEC, stdin=subprocess.DEVNULL,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def unprivileged(tmp_path_factory):
    """Skip the module unless a child of this test really cannot open a file of mode 000."""
    probe = tmp_path_factory.mktemp("perm") / "locked"
    probe.write_text("secret")
    probe.chmod(0)
    try:
        done = subprocess.run([sys.executable, "-c", f"open({str(probe)!r}).read()"], capture_output=True,
                              text=True, timeout=60, preexec_fn=PREEXEC)
    except (OSError, subprocess.SubprocessError) as err:
        pytest.skip(f"cannot start a child without file-permission override: {err}")
    if "PermissionError" not in done.stderr:
        pytest.skip("file modes do not apply to a child of this test (root without CAP_SETPCAP?): "
                    "unreadable-input cases cannot be exercised here")


@pytest.fixture
def work(tmp_path):
    """A temp folder whose modes are restored afterwards (so it can be removed as any user)."""
    yield tmp_path
    for p in [tmp_path, *tmp_path.rglob("*")]:
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() else 0o644)


def lock(p: Path, mode: int = 0) -> Path:
    p.chmod(mode)
    return p


def nan_log(p: Path) -> Path:
    p.write_text("".join(f"iter {i}: loss {'nan' if i == 50 else 2.0}, time 10.0ms\n" for i in range(100)))
    return p


def hf(d: Path, nan: bool = False) -> Path:
    folder = cf.save_hf(cf.gpt2(), d)
    if nan:
        cf.edit_safetensors(folder, lambda name, t: t.fill_(float("nan")) if name.endswith("h.1.mlp.c_fc.weight")
                            else None)
    return folder


def assert_clean(done: subprocess.CompletedProcess) -> None:
    assert done.returncode in (0, 1, 2), done.stderr[-2000:]
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-2000:]


def assert_unreadable(done: subprocess.CompletedProcess, path: Path) -> None:
    """Exit 2 and one line ``Error: <file>: <problem>`` that says the file cannot be read (ours,
    not click's usage message)."""
    assert_clean(done)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: ") and f"{path.name}: " in lines[0], lines[0]
    assert "denied" in lines[0].lower() and "--help" not in lines[0], lines[0]


def finding_ids(done: subprocess.CompletedProcess) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in json.loads(done.stdout)["findings"]:
        out.setdefault(f["id"], []).append(f)
    return out


# --- the input itself is unreadable: exit 2, one line ------------------------------------------

def _batch_pt(d: Path) -> Path:
    import torch

    torch.save({"input_ids": torch.ones(2, 8, dtype=torch.long)}, d / "batch.pt")
    return d / "batch.pt"


def _pt(d: Path) -> Path:
    import torch

    torch.save({"w": torch.ones(2)}, d / "m.pt")
    return d / "m.pt"


def _safetensors(d: Path) -> Path:
    import torch
    from safetensors.torch import save_file

    save_file({"w": torch.ones(2)}, str(d / "m.safetensors"))
    return d / "m.safetensors"


def _config(d: Path) -> Path:
    (d / "config.json").write_text(json.dumps({"model_type": "gpt2", **cf.GPT2}))
    return d / "config.json"


def _jsonl_batch(d: Path) -> Path:
    (d / "data.jsonl").write_text('{"input_ids": [1, 2, 3]}\n' * 4)
    return d / "data.jsonl"


UNREADABLE_INPUTS = {
    "log": lambda d: nan_log(d / "train.log"),
    "pt": _pt,
    "safetensors": _safetensors,
    "config.json": _config,
    "batch.pt": _batch_pt,
    "batch.jsonl": _jsonl_batch,
    "checkpoint-folder": lambda d: hf(d / "ckpt"),
}


@pytest.mark.parametrize("name", sorted(UNREADABLE_INPUTS))
def test_unreadable_input_is_one_line_exit_2(name, work, unprivileged):
    path = lock(UNREADABLE_INPUTS[name](work))
    assert_unreadable(llmfix("probe", "--static", str(path)), path)


def test_unreadable_file_given_to_ask_probe(work, unprivileged):
    log = lock(nan_log(work / "train.log"))
    assert_unreadable(llmfix("ask", "--no-input", "loss went nan", "--probe", str(log)), log)


def test_unreadable_weights_inside_a_checkpoint_folder(work, unprivileged):
    folder = hf(work / "ckpt")
    weights = lock(folder / "model.safetensors")
    assert_unreadable(llmfix("probe", "--static", str(folder)), weights)


# --- part of a folder is unreadable: the rest is still read --------------------------------------

def assert_kept_beside(done, real: str, unreadable: str, name: str) -> None:
    """The real finding survives next to the unreadable input, which is named in its own finding."""
    assert_clean(done)
    found = finding_ids(done)
    assert done.returncode == 1 and real in found, done.stdout[-2000:]
    assert any(name in f["where"] + f["message"] for f in found.get(unreadable, [])), found.keys()


def test_log_folder_with_one_unreadable_log_still_finds_the_nan(work, unprivileged):
    logs = work / "logs"
    logs.mkdir()
    nan_log(logs / "a.log")
    lock(nan_log(logs / "b.log"))
    assert_kept_beside(llmfix("probe", "--json", str(logs)), "logs.nan", "logs.unreadable", "b.log")


def test_run_folder_with_unreadable_latest_checkpoint_probes_the_readable_one(work, unprivileged):
    run = work / "run"
    hf(run / "checkpoint-2", nan=True)
    hf(run / "checkpoint-4")
    lock(run / "checkpoint-4")
    done = llmfix("probe", "--static", "--json", str(run))  # checkpoint-2's NaN is found
    assert_kept_beside(done, "weights.nonfinite", "checkpoint.unreadable", "checkpoint-4")


def test_run_folder_with_only_unreadable_checkpoints_is_one_line(work, unprivileged):
    run = work / "run"
    hf(run / "checkpoint-4")
    lock(run / "checkpoint-4")
    assert_unreadable(llmfix("probe", "--static", str(run)), run / "checkpoint-4")


def test_unreadable_optimizer_state_keeps_the_weights_findings(work, unprivileged):
    import torch

    folder = hf(work / "checkpoint-3", nan=True)
    model = cf.gpt2()
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 4, dtype=torch.long), labels=torch.ones(1, 4, dtype=torch.long)).loss.backward()
    opt.step()
    torch.save(opt.state_dict(), folder / "optimizer.pt")
    lock(folder / "optimizer.pt")
    done = llmfix("probe", "--static", "--json", str(folder))
    assert_kept_beside(done, "weights.nonfinite", "optimizer.unreadable", "optimizer.pt")


# --- knowledge, cache and site ----------------------------------------------------------------

def test_unreadable_knowledge_file_is_one_line(work, unprivileged):
    tree = work / "knowledge"
    shutil.copytree(ROOT / "rules", tree / "rules")
    shutil.copytree(ROOT / "kb", tree / "kb")
    locked = lock(tree / "rules" / "nan-loss.yaml")
    done = llmfix("ask", "--no-input", "loss went nan", env={"LLMFIX_KNOWLEDGE": str(tree)})
    assert_unreadable(done, locked)


@pytest.mark.parametrize("mode", [0o555, 0o000])
def test_ask_works_without_a_usable_cache(work, unprivileged, mode):
    cache = work / "cache"
    (cache / "llmfix").mkdir(parents=True)
    done = llmfix("ask", "--no-input", "--json", "loss went nan", env={"XDG_CACHE_HOME": str(cache)})
    assert done.returncode == 0, done.stderr  # fills the cache
    lock(cache / "llmfix", mode)
    done = llmfix("ask", "--no-input", "--json", "loss went nan", env={"XDG_CACHE_HOME": str(cache)})
    assert_clean(done)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert json.loads(done.stdout)["symptoms"][0]["id"] == "nan-loss"


def test_site_build_into_an_unwritable_folder_is_one_line(work, unprivileged):
    out = work / "site"
    out.mkdir()
    lock(out, 0o555)
    for target in (out, out / "new"):
        done = llmfix("site", "build", str(target))
        assert_clean(done)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and "denied" in lines[0].lower(), done.stderr
        assert str(out) in lines[0]


@pytest.mark.parametrize("command", [("kb", "new", "grad-stall", "--root"), ("site", "serve", "--port", "0", "--dir"),
                                     ("site", "build")])
def test_an_unreadable_folder_given_to_kb_new_or_site_is_one_line(work, unprivileged, command):
    folder = work / "tree"
    (folder / "rules").mkdir(parents=True)
    (folder / "index.html").write_text("<!doctype html>")
    done = llmfix(*command, str(lock(folder)))
    assert_unreadable(done, folder)


def test_kb_new_into_an_unwritable_rules_folder_is_one_line(work, unprivileged):
    rules = work / "rules"
    rules.mkdir()
    lock(rules, 0o555)
    done = llmfix("kb", "new", "grad-stall", "--root", str(work))
    assert_clean(done)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "denied" in lines[0].lower(), done.stderr
    assert lines[0].startswith(f"Error: {rules / 'grad-stall.yaml'}: cannot write"), lines[0]
