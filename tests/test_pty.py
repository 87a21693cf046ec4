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
    child.expect("Question 1 of at most 3")
    child.expect("attention_mask values")
    child.sendline("y")
    child.expect("Top causes so far:")  # the running top 3 between answers
    child.expect(r"1\. \[\w+ 0\.\d\d\] ")
    child.expect("Question 2 of at most")
    child.expect("first 100 steps")
    child.sendline("y")
    child.expect("Which precision")
    child.sendline("2")  # choice by number: bf16
    child.expect(pexpect.EOF)
    out = child.before
    assert "nan-loss.lr-too-high" in out and "Traceback" not in out
    child.close()
    assert child.exitstatus == 0


def test_a_bad_answer_is_explained_in_words(mini_root):
    child = spawn(mini_root, "loss is nan")
    child.expect("attention_mask values")
    child.sendline("perhaps")
    child.expect("expects yes or no")
    assert "data.mask.binary" not in child.before + child.after  # no fact id in what the user reads
    child.sendline("q")
    child.expect(pexpect.EOF)
    child.close()


def test_q_finishes_with_the_ranking_so_far(mini_root):
    child = spawn(mini_root, "loss is nan")
    child.expect("attention_mask values")
    child.sendline("y")
    child.expect("first 100 steps")
    child.sendline("q")
    child.expect(pexpect.EOF)
    out = child.before
    assert "Causes, most likely first" in out and "Traceback" not in out
    assert "data.mask.binary = True, from user" in out or "nan-loss.invalid-mask" in out
    child.close()
    assert child.exitstatus == 0


def test_ctrl_c_prints_the_partial_result_and_exits_130(mini_root):
    child = spawn(mini_root, "loss is nan")
    child.expect("attention_mask values")
    child.sendline("y")
    child.expect("first 100 steps")
    child.sendintr()
    child.expect(pexpect.EOF)
    out = child.before
    assert "Traceback" not in out and "Causes, most likely first" in out
    child.close()
    assert child.exitstatus == 130


def test_ctrl_d_starts_the_report_on_a_fresh_line(mini_root):
    child = spawn(mini_root, "loss is nan")
    child.expect("attention_mask values")
    child.expect("> ")
    child.sendeof()
    child.expect(pexpect.EOF)
    out = child.before
    assert "Traceback" not in out and "nan-loss.lr-too-high" in out
    report_line = next(line for line in out.splitlines() if "Symptom:" in line)
    assert report_line.lstrip("\r").startswith("Symptom:"), repr(report_line)
    child.close()
    assert child.exitstatus == 0
