"""loss-plateau.pretrained-not-loaded: the checkpoint's weights never reached the model (a key
prefix or class mismatch skipped by strict=False or by from_pretrained's 'newly initialized'),
read from the warning users paste and from their words; rotary inv_freq buffers are harmless."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from troubleshoot import cli
from troubleshoot.evidence import extract
from troubleshoot.knowledge import load

CID = "loss-plateau.pretrained-not-loaded"
BODY_WARNING = (
    "Some weights of LlamaForCausalLM were not initialized from the model checkpoint at ./ckpt/base and are "
    "newly initialized: ['model.embed_tokens.weight', 'model.layers.0.input_layernorm.weight', "
    "'model.layers.0.mlp.down_proj.weight', 'model.layers.0.self_attn.q_proj.weight', 'lm_head.weight']\n"
    "You should probably TRAIN this model on a down-stream task to be able to use it for predictions and inference.")
ROTARY_WARNING = (
    "Some weights of LlamaForCausalLM were not initialized from the model checkpoint at ./llama_7b and are newly "
    "initialized: ['model.layers.0.self_attn.rotary_emb.inv_freq', 'model.layers.1.self_attn.rotary_emb.inv_freq']")
INCOMPATIBLE = "_IncompatibleKeys(missing_keys=['layers.0.attention.wq.weight', 'layers.0.attention.wk.weight'], unexpected_keys=[])"


@pytest.fixture(scope="module")
def kb():
    return load()


@pytest.mark.parametrize("text, expected", [
    (BODY_WARNING, True),
    (INCOMPATIBLE, True),
    ("it turned out the pretrained weights were not loaded at all", True),
    ("后来发现预训练权重没有加载上", True),
    (ROTARY_WARNING, None),                      # computed buffers, not weights: harmless
    ("the weights were loaded fine, the loss still stays at 2.3", None),
])
def test_read_from_the_paste_and_the_words(kb, text, expected):
    hit = extract(kb, text).facts.get("lossplateau.weights_not_loaded")
    assert (hit.value if hit else None) == expected


def _causes(text: str) -> list[str]:
    result = CliRunner().invoke(cli.main, ["ask", "--no-input", "--json", "--top", "50", text])
    assert result.exit_code in (0, 1), result.output
    return [c["id"] for c in json.loads(result.stdout)["causes"]]


def test_a_strict_false_load_with_missing_keys_ranks_it_first():
    causes = _causes("fine-tuning from my checkpoint, the loss does not decrease and stays around 10.4; I load it "
                     f"with load_state_dict(strict=False)\n{INCOMPATIBLE}")
    assert causes[0] == CID


def test_without_the_evidence_it_stays_behind_the_usual_causes():
    assert _causes("fine-tuning from my checkpoint, the loss does not decrease and stays around 10.4")[0] != CID
