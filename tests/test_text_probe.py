"""Text records: pipeline artefacts (seed 001's escape characters), duplicates, short samples,
periodic repeats, chat / prompt-completion layouts, and token checks through a tiny tokenizer."""
from __future__ import annotations

import json

import pytest
import torch

import batchfactory as bf
from troubleshoot.loaders import batch as loader
from troubleshoot.observations import Artifact
from troubleshoot.loaders import detect
from troubleshoot.probes import ProbeContext, config
from troubleshoot.probes.data import batch as probe
from troubleshoot.probes.data.labels import periodic_runs


def run(records, tmp_path, ckpt=None, name="data.jsonl"):
    path = bf.save_jsonl(records, tmp_path / name)
    art = loader.sniff(path)
    assert art is not None and art.kind == "batch"
    arts = [art] + ([Artifact(str(ckpt), "hf-checkpoint")] if ckpt else [])
    return probe.run(ProbeContext(arts))


def finding(obs, id):
    found = [f for f in obs.findings if f.id == id]
    assert found, f"no {id} in {[(f.id, f.message) for f in obs.findings]}"
    return found[0]


def severities(obs):
    return {f.id: f.severity for f in obs.findings}


def test_sniff_text_and_chat(tmp_path):
    art = loader.sniff(bf.save_jsonl(bf.text_records(7), tmp_path / "t.jsonl"))
    assert art.detail == "jsonl text, 7 samples"
    chat = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}]
    assert loader.sniff(bf.save_jsonl(chat, tmp_path / "c.jsonl")).detail == "jsonl chat messages, 1 samples"


def test_clean_text_has_no_findings_above_info(tmp_path):
    obs = run(bf.text_records(50), tmp_path)
    assert not [f for f in obs.findings if f.severity != "info"], obs.findings
    for name in ("data.text.escape_rate", "data.text.duplicate_rate", "data.text.short_rate"):
        assert obs.facts[name].value == 0.0


@pytest.mark.parametrize("bad,n,severity", [(1, 200, "info"), (5, 50, "warning"), (20, 50, "error")])
def test_escape_characters(tmp_path, bad, n, severity):
    records = bf.text_records(n)
    for r in records[:bad]:
        r["text"] = r["text"].replace("\n", "\\n") + ' she said \\"yes\\"'
    obs = run(records, tmp_path)
    f = finding(obs, "data.text.escape_rate")
    assert f.severity == severity and f.value == bad / n
    assert obs.facts["data.text.escape_rate"].value == bad / n
    assert "line 1" in f.message and f.where.endswith("data.jsonl: line 1")


def test_latex_and_code_are_not_escapes(tmp_path):
    records = [{"text": r"The gradient \nabla f and \theta \to 0 as \rho grows; \text{done}."},
               {"text": 'def f():\n    print("a\\n")\n    return 1\n'},
               {"text": "caf\\u00e9 au lait"}]
    obs = run(records, tmp_path)
    assert obs.facts["data.text.escape_rate"].value == round(1 / 3, 4)


def test_html_entities_and_mojibake(tmp_path):
    records = bf.text_records(20)
    records[0]["text"] += " Tom &amp; Jerry"
    records[1]["text"] += " caf\u00c3\u00a9 and it\u00e2\u20ac\u2122s"
    obs = run(records, tmp_path)
    assert severities(obs)["data.text.entity_rate"] == "warning"
    assert obs.facts["data.text.mojibake_rate"].value == 0.05


def test_duplicates(tmp_path):
    records = bf.text_records(20)
    records[7] = {"text": "  " + records[2]["text"].upper() + " "}
    records[9] = dict(records[2])
    obs = run(records, tmp_path)
    f = finding(obs, "data.text.duplicate_rate")
    assert f.value == 0.1 and f.severity == "warning" and "line 8 repeats line 3" in f.message


def test_short_and_empty_samples(tmp_path):
    records = bf.text_records(40)
    records[4] = {"text": ""}
    records[5] = {"text": "ok"}
    obs = run(records, tmp_path)
    f = finding(obs, "data.text.short_rate")
    assert f.severity == "warning" and f.value == 0.05 and "1 empty" in f.message


def test_periodic_word_repeats(tmp_path):
    records = bf.text_records(10)
    records[3]["text"] += " " + "ha ha ho " * 40
    obs = run(records, tmp_path)
    f = finding(obs, "data.text.periodic_repeats")
    assert "line 4: period 3" in f.message and obs.facts["data.repeats.rate"].value == 0.1


def test_periodic_runs_smallest_period_and_separators():
    seq = torch.tensor([5, 6] * 40 + [-(1 << 40)] + [7] * 31 + [9])
    hits = periodic_runs(seq, 13, 32)
    assert hits == [(0, 2, 80)]  # the 31 sevens fall short of 32 repeats
    assert periodic_runs(torch.tensor([7] * 32), 13, 32) == [(0, 1, 32)]


def test_chat_and_prompt_completion_empty_target(tmp_path):
    records = [{"prompt": "Q: w4 w5?", "completion": " A: w6."},
               {"prompt": "Q: w7 w8?", "completion": ""},
               {"messages": [{"role": "user", "content": "w9 w10 w11 w12"}, {"role": "assistant", "content": ""}]}]
    obs = run(records, tmp_path)
    f = finding(obs, "data.labels.no_target")
    assert f.value == {"rows": 2, "batch": False} and "line 2" in f.message
    assert obs.facts["data.labels.no_target"].value is True


def test_tokenised_text_missing_eos(tmp_path):
    ckpt = bf.make_checkpoint(tmp_path / "ck", add_eos=False)
    records = [{"text": bf.words(range(4 + i, 20 + i))} for i in range(6)]
    obs = run(records, tmp_path, ckpt)
    f = finding(obs, "data.eos.present")
    assert f.severity == "warning" and "tokenised with ck's tokenizer" in f.message
    assert obs.facts["data.eos.present"].value is False
    ok = bf.make_checkpoint(tmp_path / "ok")
    obs = run(records, tmp_path, ok, name="again.jsonl")
    assert obs.facts["data.eos.present"].value is True
    assert not [f for f in obs.findings if f.severity != "info"], obs.findings


def test_tokenised_text_out_of_range_when_tokenizer_outgrows_embedding(tmp_path):
    ckpt = bf.make_checkpoint(tmp_path / "ck", embedding_rows=40)  # tokenizer has 64 tokens
    obs = run([{"text": bf.words([50, 51, 52])}], tmp_path, ckpt)
    f = finding(obs, "data.tokens.out_of_range")
    assert "[0, 40)" in f.message and obs.facts["data.tokens.out_of_range"].value is True


def test_chat_template_tokenisation_and_end_of_turn(tmp_path):
    template = ("{% for m in messages %}{{ m['content'] }} <|im_end|> {% endfor %}")
    ckpt = bf.make_checkpoint(tmp_path / "ck", vocab=65, extra={"<|im_end|>": 64}, chat_template=template)
    records = [{"messages": [{"role": "user", "content": "w4 w5"}, {"role": "assistant", "content": "w6"}]}]
    obs = run(records, tmp_path, ckpt)
    assert obs.facts["data.eos.present"].value is True
    # the template ends turns with <|im_end|> (64) but generation stops only on </s> (2): a fault of
    # the checkpoint's files, reported once by the config probe
    assert "data.eos.id_mismatch" not in {f.id for f in obs.findings}
    f = next(f for f in config.run(ProbeContext([detect(ckpt)])).findings if f.id == "config.eos_mismatch")
    assert f.value["chat_template"] == [64] and f.severity == "warning"


def test_bad_lines_are_reported_not_fatal(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in bf.text_records(5)) + "\n{not json\n")
    obs = probe.run(ProbeContext([loader.sniff(path)]))
    assert "line 6" in finding(obs, "data.batch.inconsistent").message
