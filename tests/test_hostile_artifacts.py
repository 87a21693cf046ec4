"""Artifacts written carelessly or with hostile intent (issue 14): logs, checkpoints, batches,
tokenizer files and the probe CLI never print a traceback, hang or blow up memory; an unreadable
input is one line naming the file (exit 2) or an error finding, never "Nothing wrong found"; and
no input is changed. Bounds are those of docs/resource-policy.md."""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from troubleshoot.cli import main
from troubleshoot.errors import ArtifactError
from troubleshoot.files import parse_json
from troubleshoot.loaders.checkpoint import MAX_CONFIG_INT, sane_config
from troubleshoot.loaders.logs import iter_records
from troubleshoot.loaders.tensors import list_safetensors
from troubleshoot.loaders.tokenizer import template_over_budget

ROOT = Path(__file__).resolve().parent.parent
MAX_SECONDS = 30            # docs/resource-policy.md: no generated input takes longer ...
MAX_EXTRA_RSS = 400 << 20   # ... or more memory than this above the same command on a tiny log
NOTHING_WRONG = "Nothing wrong found"


# --- generated artifacts -----------------------------------------------------------------------

def nano(i: int, loss) -> str:
    return f"iter {i}: loss {loss}, time 10.0ms\n"


def nan_log(encode=lambda s: s.encode(), line=nano, end="\n") -> bytes:
    return encode("".join(line(i, "nan" if i == 50 else 2.0).replace("\n", end) for i in range(100)))


def st_file(header, data: bytes = b"") -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def hf_folder(d: Path, **config) -> Path:
    d.mkdir()
    cfg = {"model_type": "gpt2", "vocab_size": 100, "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64}
    (d / "config.json").write_text(json.dumps({**cfg, **config}))
    return d


def torch_file(path: Path, obj) -> Path:
    import torch

    torch.save(obj, path)
    return path


def _batch(key: str):
    import torch

    return {key: {"input_ids": torch.ones(2, 8, dtype=torch.long), "attention_mask": torch.full((2, 8), 2)}}


# name -> (builder(dir) -> path, expected: "error" = exit 2 naming the file, "problem" = exit 1,
#          "any" = 0/1/2 as long as it is clean)
CASES = {
    "log-cr-only": (lambda d: _write(d / "train.log", nan_log(end="\r")), "problem"),
    "log-ansi": (lambda d: _write(d / "train.log", nan_log(line=lambda i, x: f"\x1b[32miter {i}\x1b[0m: loss {x}, "
                                                                           "time 1.0ms\n")), "problem"),
    "log-utf16": (lambda d: _write(d / "train.log", nan_log(lambda s: s.encode("utf-16"))), "problem"),
    "log-utf32": (lambda d: _write(d / "train.log", nan_log(lambda s: s.encode("utf-32"))), "problem"),
    "log-random-words": (lambda d: _write(d / "train.log", " ".join(random.Random(1).choice(
        ["foo", "bar", "loss", "step"]) for _ in range(3000)).encode()), "problem"),
    "log-whitespace": (lambda d: _write(d / "train.log", b" \n\t\n" * 100), "problem"),
    "log-lone-bom": (lambda d: _write(d / "train.log", b"\xef\xbb\xbf"), "problem"),
    "log-folder-binary-only": (lambda d: _write(d / "logs" / "train.log", bytes(range(256)) * 8).parent, "problem"),
    "log-two-runs-appended": (lambda d: _write(d / "train.log", "".join(
        [nano(i, 2.0) for i in range(50, 100)] + [nano(i, "nan" if i == 30 else 2.0) for i in range(50)]).encode()),
        "problem"),
    "log-overflow-64k-lines": (lambda d: _write(d / "train.log", (("OVERFLOW! " * 6500 + "\n") * 10 + "".join(
        nano(i, "nan" if i == 5 else 2.0) for i in range(10))).encode()), "problem"),
    "jsonl-400-digit-loss": (lambda d: _write(d / "log.jsonl", ("".join(json.dumps({"step": i, "loss": 2.0}) + "\n"
                                                                        for i in range(20))
                                                                + '{"step": 20, "loss": 1' + "0" * 400 + "}\n").encode()),
                             "problem"),
    "log-fifo": (lambda d: _fifo(d / "train.log"), "error"),
    "log-dev-zero": (lambda d: _link(d / "train.log", "/dev/zero"), "error"),
    "config-5000-deep": (lambda d: _write(d / "m" / "config.json",
                                          b'{"model_type":"gpt2","x":' + b"[" * 5000 + b"]" * 5000 + b"}").parent,
                         "error"),
    "config-5000-digit-int": (lambda d: _write(d / "m" / "config.json",
                                               b'{"model_type":"gpt2","vocab_size":1' + b"0" * 5000 + b"}").parent,
                              "error"),
    "config-vocab-string": (lambda d: hf_folder(d / "m", vocab_size="100"), "problem"),
    "config-n-embd-negative": (lambda d: hf_folder(d / "m", n_embd=-1), "problem"),
    "config-eos-10-30": (lambda d: hf_folder(d / "m", eos_token_id=10 ** 30), "problem"),
    "config-fifo": (lambda d: _fifo(d / "m" / "config.json").parent, "error"),
    "checkpoint-dangling-weights": (lambda d: _dangling(hf_folder(d / "m"), "model.safetensors"), "problem"),
    "checkpoint-fifo-weights": (lambda d: _fifo(hf_folder(d / "m") / "model.safetensors").parent, "problem"),
    "index-weight-map-list": (lambda d: _write(hf_folder(d / "m") / "model.safetensors.index.json",
                                               b'{"weight_map": ["a", "b"]}').parent, "problem"),
    "safetensors-offsets-dict": (lambda d: _st(d, {"a": {"dtype": "F32", "shape": [2], "data_offsets": {"a": 1}}}),
                                 "error"),
    "safetensors-offsets-negative": (lambda d: _st(d, {"a": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}}),
                                     "error"),
    "safetensors-offsets-overlap": (lambda d: _st(d, {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}),
                                    "error"),
    "safetensors-shape-negative": (lambda d: _st(d, {"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}),
                                   "error"),
    "safetensors-header-5000-deep": (lambda d: _write(d / "model.safetensors",
                                                      st_file(b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}")), "error"),
    "batch-safetensors-string-entry": (lambda d: _write(d / "batch.safetensors",
                                                        st_file({"input_ids": "x", "labels": None})), "error"),
    "text-named-pt": (lambda d: _write(d / "x.pt", b"hello world\n" * 10), "error"),
    "passwd-named-bin": (lambda d: _write(d / "pytorch_model.bin", b"root:x:0:0:root:/root:/bin/bash\n" * 20),
                         "error"),
    "random-bytes-bin": (lambda d: _write(d / "x.bin", random.Random(2).randbytes(4096)), "error"),
    "pt-fifo": (lambda d: _fifo(d / "x.pt"), "error"),
    "batch-under-batch-key": (lambda d: torch_file(d / "b.pt", _batch("batch")), "problem"),
    "batch-under-inputs-key": (lambda d: torch_file(d / "b.pt", _batch("inputs")), "problem"),
    "jsonl-batch-5000-deep": (lambda d: _write(d / "data.jsonl",
                                               b'{"input_ids": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"), "any"),
    # found by the hidden re-run of the audit's families
    "log-10-mb-line-of-loss-words": (lambda d: _write(d / "train.log", nan_log()[:400] + b"loss " * (2 << 20) + b"\n"
                                                      + nan_log()[400:]), "problem"),
    "log-nul-bytes-in-lines": (lambda d: _write(d / "train.log", nan_log().replace(b"\n", b"\n\x00", 3)), "problem"),
    "log-nul-run-of-a-crash": (lambda d: _write(d / "train.log", nan_log()[:300] + b"\x00" * 4096 + nan_log()[300:]),
                               "problem"),
    "log-lines-without-a-loss-value": (lambda d: _write(d / "train.log", "iter 1: loss caf\xe9\n".encode("latin-1") * 10),
                                       "problem"),
    "log-losses-near-float-max": (lambda d: _write(d / "train.log", "".join(
        nano(i, v) for i, v in enumerate(["1e308", "-1e308", "inf", "2.0"] * 5)).encode()), "problem"),
    "jsonl-cr-only": (lambda d: _write(d / "m.jsonl", "".join(f'{{"step": {i}, "loss": {"NaN" if i == 9 else 2.0}}}\r'
                                                              for i in range(20)).encode()), "problem"),
    "jsonl-first-record-over-the-head": (lambda d: _write(d / "m.jsonl", (json.dumps(
        {"step": 0, "loss": 2.0, "note": "x" * (2 << 20)}) + "\n" + '{"step": 1, "loss": NaN}\n').encode()), "problem"),
    "trainer-state-junk-entries-before-a-nan": (lambda d: _write(d / "trainer_state.json", json.dumps({"log_history": [
        5, None, {"step": "x", "loss": "y"}, {"step": 1, "loss": float("nan")}]}).encode()), "problem"),
    "trainer-state-utf-16": (lambda d: _write(d / "trainer_state.json", json.dumps({"log_history": [
        {"step": i, "loss": float("nan") if i == 3 else 2.0} for i in range(6)]}).encode("utf-16")), "problem"),
    "state-dict-with-int-keys": (lambda d: torch_file(d / "x.pt", {1: _tensor([1.0, float("nan")]),
                                                                   (1, 2): _tensor([1.0])}), "problem"),
    "dangling-config-beside-nan-weights": (lambda d: _nan_weights(_dangling(_mkdir(d / "m"), "config.json")), "problem"),
    "launch-script-doubling-variables": (lambda d: _write(d / "launch.sh", ("V0='--lr 1'\n" + "".join(
        f'V{i}="$V{i - 1} ${{V{i - 1}}}$V{i - 1}"\n' for i in range(1, 40)) + "torchrun train.py $V39\n").encode()), "any"),
    "launch-script-doubling-arrays": (lambda d: _write(d / "launch.sh", ("A0=(--lr 1)\n" + "".join(
        f"A{i}=(${{A{i - 1}[@]}} ${{A{i - 1}[@]}})\n" for i in range(1, 40)) + "deepspeed train.py ${A39[@]}\n").encode()),
        "any"),
    "training-script-100k-unary-minus": (lambda d: _write(d / "train.py", b"x = " + b"-" * 100_000 + b"1\n"), "error"),
    "training-script-nested-150-deep": (lambda d: _write(d / "train.py", b"args = TrainingArguments(lr=" + b"[" * 150
                                                         + b"]" * 150 + b")\n"), "error"),
    "training-script-over-256-kib": (lambda d: _write(d / "train.py", b"b = (" + b"1," * 150_000 + b")\n"), "error"),
    "megatron-latest-of-5000-digits": (lambda d: _write(_mkdir(_mkdir(d / "ck") / "global_step100").parent / "latest",
                                                        b"global_step" + b"9" * 5000), "any"),
    "trainer-folder-of-5000-digits": (lambda d: hf_folder(_mkdir(d / "run") / ("checkpoint-" + "9" * 200)).parent,
                                      "any"),
    "index-weight-map-ints-beside-nan-shard": (lambda d: _nan_index(d, b'{"weight_map": {"a": 1}}'), "problem"),
    "index-names-a-missing-shard-beside-nan-shard": (lambda d: _nan_index(d, json.dumps({"weight_map": {
        "transformer.wte.weight": "model.safetensors", "lm_head.weight": "model-00002-of-00002.safetensors"}}).encode()),
        "problem"),
    "training-script-with-a-bom": (lambda d: _write(d / "train.py", "\ufeffmodel.half()\n".encode()), "any"),
}


def _tensor(values):
    import torch

    return torch.tensor(values)


def _mkdir(d: Path) -> Path:
    d.mkdir()
    return d


def _nan_weights(folder: Path) -> Path:
    from safetensors.torch import save_file

    save_file({"transformer.wte.weight": _tensor([[0.0, float("nan")]] * 4)}, str(folder / "model.safetensors"))
    return folder


def _nan_index(d: Path, index: bytes) -> Path:
    """An HF folder whose index is broken, beside a shard that holds a NaN."""
    folder = _nan_weights(hf_folder(d / "m"))
    _write(folder / "model.safetensors.index.json", index)
    return folder


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def _link(path: Path, target: str) -> Path:
    path.symlink_to(target)
    return path


def _dangling(folder: Path, name: str) -> Path:
    (folder / name).symlink_to(folder / "gone")
    return folder


def _st(d: Path, header: dict) -> Path:
    return _write(d / "model.safetensors", st_file(header, b"\0" * 16))


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every regular file under ``root`` (FIFOs and device links are never opened)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def assert_clean(result, path: Path, expected: str) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    out = result.output
    assert "Traceback" not in out and result.exit_code in (0, 1, 2), out
    assert "probe.crashed" not in out, out
    if result.exit_code == 2:
        lines = out.strip().splitlines()
        assert len(lines) == 1 and path.name in lines[0], out
    if expected == "error":
        assert result.exit_code == 2, out
    elif expected == "problem":
        assert result.exit_code == 1 and NOTHING_WRONG not in out, out


@pytest.mark.parametrize("name", sorted(CASES))
def test_probe_cli_on_hostile_artifact(name, tmp_path):
    build, expected = CASES[name]
    path = build(tmp_path)
    before = snapshot(tmp_path)
    start = time.monotonic()
    result = CliRunner().invoke(main, ["probe", "--static", str(path)])
    assert time.monotonic() - start < MAX_SECONDS
    assert_clean(result, path, expected)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("bad", ["binary", "fifo", "bad-safetensors"])
def test_an_unreadable_path_never_hides_the_others(bad, tmp_path):
    """Given with a log that shows a NaN, an unusable path is an error finding, not exit 2."""
    path = {"binary": lambda: _write(tmp_path / "a.log", bytes(range(256)) * 8),
            "fifo": lambda: _fifo(tmp_path / "a.log"),
            "bad-safetensors": lambda: _st(tmp_path, {"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})}[bad]()
    log = _write(tmp_path / "b.log", nan_log())
    result = CliRunner().invoke(main, ["probe", "--static", str(path), str(log)])
    assert_clean(result, log, "problem")
    assert "input.unreadable" in result.output and "logs.nan" in result.output


@pytest.mark.parametrize("name", ["\x1b[2J\x1b]0;pwned\x07.log", "a\rb.log", "\x9b2J.log"])
def test_file_names_never_reach_the_terminal_raw(name, tmp_path):
    """A report naming a file called like an escape sequence shows the sequence escaped: the
    terminal must not clear its screen or take a new title."""
    log = _write(tmp_path / name, nan_log())
    result = CliRunner().invoke(main, ["probe", "--static", str(log)], color=True)
    assert_clean(result, log, "problem")
    assert not re.search(r"\x1b(?!\[[0-9;]*m)|[\x07\r\x9b]", result.output), repr(result.output)


def test_only_weights_a_refused_pickle_is_a_problem(tmp_path):
    """An HF folder whose one weights file is refused is no "Nothing wrong found"."""
    class Payload:
        def __reduce__(self):
            return (print, ("ran",))

    folder = hf_folder(tmp_path / "m")
    torch_file(folder / "pytorch_model.bin", {"w": Payload()})
    result = CliRunner().invoke(main, ["probe", "--static", str(folder)])
    assert_clean(result, folder, "problem")
    assert "checkpoint.unsafe_pickle_refused" in result.output


def test_a_cut_trainer_state_is_no_all_clear(tmp_path):
    """A trainer_state.json cut mid-file (a crash while saving) whose NaN sat after the cut: the
    entries before the cut are read, the cut is reported, and the run is not called clean."""
    state = json.dumps({"global_step": 100, "log_history": [
        {"step": i, "loss": float("nan") if i == 80 else 2.0} for i in range(100)]})
    path = _write(tmp_path / "trainer_state.json", state[:state.index('"step": 70')].encode())
    result = CliRunner().invoke(main, ["probe", "--static", str(path)])
    assert_clean(result, path, "any")
    out = " ".join(result.output.split())  # as wrapped to the terminal's width
    assert "logs.truncated" in out and "truncated trainer_state.json after 70 log entries" in out
    assert "the 70 records before that were analysed" in out and "iterations 0-69" in out
    assert NOTHING_WRONG not in out and "Read only in part" in out


def test_all_clear_keeps_its_sentences_apart(tmp_path):
    log = _write(tmp_path / "train.log", "".join(nano(i, 2.0) for i in range(50)).encode())
    result = CliRunner().invoke(main, ["probe", "--static", str(log)])
    assert result.exit_code == 0
    assert "Nothing wrong found in these artifacts. If training still misbehaves" in " ".join(result.output.split())


@pytest.mark.parametrize("name, text, problem", [
    ("dup.yaml", "learning_rate: 1e-4\nbf16: true\nlearning_rate: 2e-4\n", "duplicate key 'learning_rate' at line 3"),
    ("big.yaml", "learning_rate: 1e-4\nbf16: true\nmax_steps: 1" + "0" * 5000 + "\n", "number too long (5001 characters) at line 3"),
    ("aliased.yaml", "a: &x 1\nlearning_rate: *x\nbf16: true\nmax_steps: 1" + "0" * 5000 + "\n", "number too long"),
    ("big.json", '{"learning_rate": 1e-4, "bf16": true, "max_steps": 1' + "0" * 5000 + "}", "number too long"),
])
def test_a_config_that_no_trainer_would_read_names_its_problem(tmp_path, name, text, problem):
    """Not "unrecognised file": the one line says what is wrong, and where when YAML can tell."""
    path = _write(tmp_path / name, text.encode())
    result = CliRunner().invoke(main, ["probe", "--static", str(path)])
    assert_clean(result, path, "error")
    assert f"{path}: {problem}" in result.output and "unrecognised" not in result.output


def test_model_factory_must_be_python_and_writes_no_bytecode(tmp_path):
    result = CliRunner().invoke(main, ["probe", "--model-factory", "/etc/passwd:build"])
    assert result.exit_code == 2 and "not a Python file" in result.output
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "fac.py").write_text("import torch\n\ndef build():\n    return torch.nn.Linear(2, 2)\n")
    CliRunner().invoke(main, ["probe", "--static", "--model-factory", f"{tmp_path / 'f' / 'fac.py'}:build"])
    assert not (tmp_path / "f" / "__pycache__").exists()


# --- time and peak memory, in a child process each (os.wait4 gives its own peak RSS) -----------

def run_child(*args: str) -> tuple[int, str, float, int]:
    """(exit status, stderr, seconds, peak RSS in bytes) of ``python -m troubleshoot probe ARGS``."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "troubleshoot", "probe", *args], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        err = proc.stderr.read(1 << 16).decode(errors="replace")
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, err, time.monotonic() - start, usage.ru_maxrss * 1024


@pytest.fixture(scope="module")
def baseline_rss(tmp_path_factory) -> int:
    log = _write(tmp_path_factory.mktemp("base") / "train.log", nan_log())
    return run_child("--static", str(log))[3]


BLOWUPS = {
    "n_layer-100000": lambda d: hf_folder(d / "m", n_layer=100000),
    "chat-template-10-gb": lambda d: _template_bomb(d),
    "trainer-state-40-mb": lambda d: _write(d / "trainer_state.json", json.dumps({"log_history": [
        {"step": i, "loss": 2.0, "pad": "x" * 400} for i in range(100_000)]}).encode()),
    "overflow-100-lines-of-64k": lambda d: _write(d / "train.log", (("OVERFLOW! " * 6500 + "\n") * 100
                                                                  + nano(1, 2.0)).encode()),
}


def _template_bomb(d: Path) -> Path:
    import batchfactory as bf

    ckpt = bf.make_checkpoint(d / "ck", vocab=65, chat_template="{{ 'x' * 10**10 }}")
    data = _write(d / "data.jsonl", b'{"messages": [{"role": "user", "content": "w4 w5"}]}\n')
    return ckpt, data


@pytest.mark.parametrize("name", sorted(BLOWUPS))
def test_no_hang_or_blowup(name, tmp_path, baseline_rss):
    made = BLOWUPS[name](tmp_path)
    paths = [str(p) for p in (made if isinstance(made, tuple) else (made,))]
    static = [] if name.startswith("n_layer") else ["--static"]  # n_layer: the forward probe's estimate
    code, err, seconds, rss = run_child(*static, *paths)
    assert code in (0, 1, 2) and "Traceback" not in err, err
    assert seconds < MAX_SECONDS, f"{seconds:.1f} s"
    assert rss - baseline_rss < MAX_EXTRA_RSS, f"{(rss - baseline_rss) >> 20} MiB over the baseline"


def test_transformer_encoder_causal_leak_is_caught(tmp_path):
    """nn.TransformerEncoder with a padding mask takes PyTorch's nested-tensor fast path in eval
    mode; the causal test must still run on it and catch a model that attends to the future."""
    (tmp_path / "enc.py").write_text('''
import torch
from torch import nn


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.vocab_size, self.max_positions = 50, 64
        self.emb = nn.Embedding(50, 32)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2)
        self.head = nn.Linear(32, 50)

    def forward(self, input_ids, attention_mask=None):
        pad = None if attention_mask is None else attention_mask == 0
        return self.head(self.enc(self.emb(input_ids), src_key_padding_mask=pad))  # no causal mask


def build():
    return LM()
''')
    result = CliRunner().invoke(main, ["probe", "--model-factory", f"{tmp_path / 'enc.py'}:build"])
    assert result.exit_code == 1, result.output
    assert "forward.mask.causal_leak" in result.output and "forward.error" not in result.output


# --- the readers themselves, on generated values -------------------------------------------------

json_values = st.recursive(st.none() | st.booleans() | st.integers(-10 ** 40, 10 ** 40) | st.floats()
                           | st.text(max_size=8), lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
CONFIG_KEYS = ["vocab_size", "n_embd", "n_layer", "hidden_size", "num_attention_heads", "eos_token_id",
               "pad_token_id", "max_position_embeddings", "rope_theta", "model_type"]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(CONFIG_KEYS), json_values, max_size=6))
def test_sane_config_keeps_only_integers_in_range(cfg):
    clean, bad = sane_config(cfg)
    for key in ("vocab_size", "n_embd", "n_layer", "hidden_size", "num_attention_heads", "max_position_embeddings"):
        value = clean.get(key)
        values = value if isinstance(value, list) else [value]
        assert all(v is None or (type(v) is int and 0 <= v <= MAX_CONFIG_INT) for v in values), (key, value)
    assert len(bad) == len(set(cfg) - set(clean))
    assert all("\n" not in why for why in bad)


entries = st.fixed_dictionaries({"dtype": st.sampled_from(["F32", "F16", "I64", "X9", 5]),
                                 "shape": st.lists(st.integers(-3, 4), max_size=3) | json_values,
                                 "data_offsets": st.lists(st.integers(-8, 64), min_size=0, max_size=3) | json_values})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.text(min_size=1, max_size=5), entries | json_values, max_size=4), st.integers(0, 64))
def test_safetensors_header_is_valid_or_one_line_error(tmp_path, header, data_len):
    path = _write(tmp_path / "x.safetensors", st_file(header, b"\0" * data_len))
    try:
        infos = list_safetensors(path)
    except ArtifactError as err:
        assert "\n" not in str(err) and str(path) in str(err)
        return
    end = path.stat().st_size
    for info in infos:  # every byte range lies after the header, inside the file, in order
        assert info.nbytes >= 0 and info.start >= end - data_len and info.start + info.nbytes <= end
    assert all(a.start + a.nbytes <= b.start for a, b in itertools.pairwise(infos))


log_lines = st.lists(st.one_of(
    st.builds(nano, st.integers(-5, 10 ** 6), st.sampled_from(["2.0", "nan", "inf", "1" + "0" * 400, "-0", "x"])),
    st.sampled_from(["\r", "\x1b[31m", "\x1b[0m", "\ufeff", "OVERFLOW! " * 50, "\x00", "{", '{"loss": 1e999}',
                     '{"step": 1, "loss": ' + "[" * 3000 + "]" * 3000 + "}"]),
    st.text(max_size=40)), max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(log_lines, st.sampled_from(["utf-8", "utf-16", "utf-32"]), st.sampled_from(["train.log", "m.jsonl"]))
def test_log_reader_never_raises_anything_but_artifact_error(tmp_path, lines, encoding, name):
    path = _write(tmp_path / name, "\n".join(lines).encode(encoding, "surrogatepass"))
    try:
        list(iter_records(path))
    except ArtifactError as err:
        assert "\n" not in str(err)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200) | st.binary(max_size=200))
def test_parse_json_is_json_or_one_line_error(data):
    try:
        parse_json(data, "x.json")
    except ArtifactError as err:
        assert "\n" not in str(err) and "x.json" in str(err)


@pytest.mark.parametrize("template", ["{{ 'x' * 10**10 }}", "{{ [1] * 10**9 }}", "{{ ((9 ** 99) ** 99) ** 99 }}",
                                      "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
                                      # one C-level call the timer cannot stop, refused before it runs
                                      "{{ 'x' | center(2000000000) }}", "{{ ('x\n' * 100000) | indent(100000) }}",
                                      "{{ ('x' * 100000) | replace('x', 'x' * 100000) }}",
                                      "{{ '{:>2000000000}'.format(1) }}", "{{ '%2000000000d' % 1 }}",
                                      "{{ 'x'.ljust(2000000000) }}", "x" * (2 << 20),
                                      [{"name": "default", "template": "{{ 'x' * 10**10 }}"}]])
def test_chat_template_budget(template):
    start = time.monotonic()
    assert template_over_budget(template, [{"role": "user", "content": "hi"}], {}) is not None
    assert time.monotonic() - start < 10  # the timer stops a render at MAX_TEMPLATE_SECONDS (2 s)


# --- the live guard's incident bundles --------------------------------------------------------------

INCIDENT = {"schema": "llmfix/incident-v1", "step": 57, "trips": ["nonfinite-loss"], "values": {"loss": "nan"},
            "replay": {"ran": True, "reproduced": True, "first_module": "drop", "frames": [{"class": "Dropout"}]},
            "ranks": {"world": 2, "first": [1]}, "batches": [{"file": "batch.safetensors", "nonfinite_keys": []}],
            "nonfinite_weights": ["w"], "nonfinite_grads": ["g"], "exception": None, "lr_peak": 1e-3}
wrong = st.sampled_from([5, "x", [5, None], {"a": 1}, None, 10 ** 30, float("nan"), [{"a": 1}], True])


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(INCIDENT)), wrong, st.sampled_from([None, "replay", "ranks"]))
def test_incident_fields_of_any_type_are_read_or_one_line(field, value, inside):
    """Every field incident.json can hold, with a value of the wrong type (at the top or inside
    replay / ranks): a one-line error naming the file, or the bundle's findings; never a crash."""
    from troubleshoot.loaders import detect
    from troubleshoot.probes import ProbeContext, run_all

    data = json.loads(json.dumps(INCIDENT))
    (data[inside] if inside else data)[field] = value
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "incident.json").write_text(json.dumps(data))
        _write(folder / "metrics.jsonl", b'{"step": 1, "loss": NaN}\n')
        try:
            obs = run_all(ProbeContext([detect(folder)], static=True))
        except ArtifactError as err:
            assert "\n" not in str(err) and "incident.json" in str(err)
            return
    assert not [f for f in obs.findings if f.id == "probe.crashed"], obs.findings


@pytest.mark.parametrize("words", [["lr=" + "9" * 100_000, "loss nan"], ["\u0130 " + "RuntimeError: loss nan\n" * 40_000]])
def test_ask_on_hostile_pastes(words):
    """A 100,000-digit run (the tokenizer retried it from every digit) and a paste with one 'İ'
    (which disabled the literal index of the text search) answer like any other paste."""
    start = time.monotonic()
    result = CliRunner().invoke(main, ["ask", "--no-input", *words])
    assert time.monotonic() - start < MAX_SECONDS
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 1) and "Traceback" not in result.output


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["kb", "list"]])
def test_stdout_on_a_full_disk_is_one_line(args):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "troubleshoot", *args], cwd=ROOT, stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "Error: <stdout>: cannot write the report (No space left on device)"]


def test_console_on_a_closed_stdin_is_one_line():
    proc = subprocess.run([sys.executable, "-m", "troubleshoot", "probe", "-"], cwd=ROOT, stdin=None,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=60,
                          preexec_fn=lambda: os.close(0))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "standard input is closed" in proc.stderr


def test_console_from_a_long_stream_keeps_its_head_and_its_end():
    """stdin is read in bounded memory: the first three quarters of the budget and the last quarter
    (where the traceback ends), whatever the stream's length."""
    import io

    from troubleshoot.loaders.setup.read import MAX_CONSOLE_BYTES, _head_and_tail

    stream = io.BytesIO(b"start\n" + b"x" * (3 * MAX_CONSOLE_BYTES) + b"\nRuntimeError: the end\n")
    head, tail, cut = _head_and_tail(stream)
    assert cut and head.startswith(b"start") and tail.endswith(b"RuntimeError: the end\n")
    assert len(head) + len(tail) <= MAX_CONSOLE_BYTES

