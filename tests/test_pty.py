"""`llmfix ask` in a real pseudo-terminal: prompts, answers, Ctrl-C and EOF end cleanly."""
import os
import sys

import pytest

pexpect = pytest.importorskip("pexpect")


def spawn(mini_root, *args):
    env = {**os.environ, "LLMFIX_KNOWLEDGE": str(mini_root), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    return pexpect.spawn(sys.executable, ["-m", "troubleshoot", "ask", *args], env=env,
                         encoding="utf-8", timeout=30)


def test_answers_in_a_terminal(mini_root):
    child = spawn(mini_root, "loss is nan")
    child.expect("attention_mask values")
    child.sendline("y")
    child.expect("first 100 steps")
    child.sendline("y")
    child.expect("Which precision")
    child.sendline("2")  # choice by number: bf16
    child.expect(pexpect.EOF)
    out = child.before
    assert "nan-loss.lr-too-high" in out and "Traceback" not in out
    child.close()
    assert child.exitstatus == 0


def test_ctrl_c_ends_cleanly(mini_root):
    child = spawn(mini_root, "loss is nan")
    child.expect("attention_mask values")
    child.sendintr()
    child.expect(pexpect.EOF)
    assert "Traceback" not in child.before
    child.close()
    assert child.exitstatus in (1, 130) or child.signalstatus is None


def test_eof_ends_cleanly(mini_root):
    child = spawn(mini_root, "loss is nan")
    child.expect("attention_mask values")
    child.sendeof()
    child.expect(pexpect.EOF)
    assert "Traceback" not in child.before and "nan-loss.lr-too-high" in child.before
