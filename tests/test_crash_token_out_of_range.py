"""A token id past the vocabulary as a crash (system-failure.token-out-of-range): the device-side
assert users paste, most often after adding tokens without resize_token_embeddings. The NaN form
of the same fault (nan-loss.token-out-of-range) shares its confirming condition, so the two are
listed once."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from troubleshoot import cli
from troubleshoot.engine import twins
from troubleshoot.knowledge import load

ASSERT = ("RuntimeError: CUDA error: device-side assert triggered\n"
          "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
          "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1.")
SAME_FAULT = {"system-failure.token-out-of-range", "nan-loss.token-out-of-range"}


def _causes(text: str) -> list[dict]:
    result = CliRunner().invoke(cli.main, ["ask", "--no-input", "--json", "--top", "50", text])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["causes"]


def test_the_crash_and_the_nan_are_one_fault():
    assert twins(load())["system-failure.token-out-of-range"] == {"nan-loss.token-out-of-range"}


@pytest.mark.parametrize("text", [
    f"Training crashes at the first step after I added new special tokens to the tokenizer:\n{ASSERT}",
    ASSERT,
    f"微调时报错 {ASSERT}",
])
def test_the_pasted_assert_ranks_the_out_of_range_id_first(text):
    first = _causes(text)[0]
    assert first["id"] in SAME_FAULT and set(first.get("same_fault", [])) | {first["id"]} == SAME_FAULT


def test_a_crash_without_the_assert_does_not():
    first = _causes("Training crashes at the first step after I added new special tokens to the tokenizer")[0]
    assert first["id"] not in SAME_FAULT or first["status"] == "untested"
