"""Data-batch probe: each fault injected into a healthy batch is found with the right finding and
fact; healthy batches (.pt, .safetensors, .jsonl) give no error; unreadable files fail in one line."""
from __future__ import annotations

import json
import os
import pickle

import batchfactory as bf
import pytest
import torch

from troubleshoot.errors import ArtifactError, UnsafePickleError
from troubleshoot.loaders import batch as loader
from troubleshoot.loaders import detect
from troubleshoot.loaders.batch import rows
from troubleshoot.observations import Artifact
from troubleshoot.probes import ProbeContext, run_all
from troubleshoot.probes.data import batch as probe


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return bf.make_checkpoint(tmp_path_factory.mktemp("ckpt") / "model")


def run(path, ckpt=None):
    art = loader.sniff(path)
    assert art is not None and art.kind == "batch", f"{path} not recognised as a batch"
    arts = [art] + ([Artifact(str(ckpt), "hf-checkpoint")] if ckpt else [])
    return probe.run(ProbeContext(arts))


def _write(path, text):
    path.write_text(text)
    return path


def ids_of(obs, severity=None):
    return {f.id for f in obs.findings if severity is None or f.severity == severity}


def finding(obs, id):
    found = [f for f in obs.findings if f.id == id]
    assert found, f"no {id} finding in {[(f.id, f.message) for f in obs.findings]}"
    return found[0]


def fact(obs, name):
    return obs.facts[name].value


# ------------------------------------------------------------------------------ healthy + formats

@pytest.mark.parametrize("fmt", ["pt", "safetensors", "jsonl", "list-of-dicts", "dict-of-lists", "json"])
def test_healthy_batch_gives_no_error_or_warning(tmp_path, ckpt, fmt):
    batch = bf.healthy_batch()
    path = {
        "pt": lambda: bf.save_pt(batch, tmp_path / "b.pt"),
        "safetensors": lambda: bf.save_safetensors(batch, tmp_path / "b.safetensors"),
        "jsonl": lambda: bf.save_jsonl(bf.records_from_batch(batch), tmp_path / "b.jsonl"),
        "list-of-dicts": lambda: bf.save_pt(bf.records_from_batch(batch), tmp_path / "b.pt"),
        "dict-of-lists": lambda: bf.save_pt({k: v.tolist() for k, v in batch.items()}, tmp_path / "b.pt"),
        "json": lambda: _write(tmp_path / "b.json", json.dumps(bf.records_from_batch(batch))),
    }[fmt]()
    obs = run(path, ckpt)
    assert ids_of(obs, "error") == set() and ids_of(obs, "warning") == set(), obs.findings
    assert fact(obs, "data.mask.binary") is True
    assert fact(obs, "data.eos.present") is True
    assert fact(obs, "data.tokens.out_of_range") is False
    assert fact(obs, "data.labels.pad_not_ignored") is False
    assert fact(obs, "data.eos.masked") is False
    assert "data.eos.id_mismatch" not in obs.facts  # the batch names no EOS id of its own
    assert all(f.source == "probe:batch" for f in obs.facts.values())


def test_sniff_details_and_non_batches(tmp_path):
    batch = bf.healthy_batch(rows=8, width=32)
    art = loader.sniff(bf.save_pt(batch, tmp_path / "b.pt"))
    assert art.detail == "tensor batch 8x32 (input_ids, attention_mask, labels)"
    art = loader.sniff(bf.save_safetensors(batch, tmp_path / "b.safetensors"))
    assert art.kind == "batch" and art.detail.startswith("tensor batch 8x32")
    art = loader.sniff(bf.save_jsonl(bf.records_from_batch(batch), tmp_path / "b.jsonl"))
    assert art.detail == "jsonl token ids, 8 samples"
    # a state dict and a metrics log are somebody else's
    assert loader.sniff(bf.save_safetensors({"w": torch.zeros(2, 2)}, tmp_path / "sd.safetensors")) is None
    assert loader.sniff(bf.save_pt({"w": torch.zeros(2, 2)}, tmp_path / "sd.pt")) is None
    log = bf.save_jsonl([{"step": i, "loss": 2.0 - i / 10} for i in range(5)], tmp_path / "metrics.jsonl")
    assert loader.sniff(log) is None


def test_probe_never_writes(tmp_path, ckpt):
    path = bf.save_pt(bf.healthy_batch(), tmp_path / "b.pt")
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in [*tmp_path.iterdir(), *ckpt.iterdir()]}
    run(path, ckpt)
    after = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in [*tmp_path.iterdir(), *ckpt.iterdir()]}
    assert before == after


# --------------------------------------------------------------------------------------- masks

def test_non_binary_mask(tmp_path, ckpt):
    batch = bf.healthy_batch()
    batch["attention_mask"][1, 3] = 2
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"), ckpt)
    f = finding(obs, "data.mask.non_binary")
    assert f.severity == "error" and "row 1, position 3: attention_mask = 2" in f.message
    assert f.where.endswith("b.pt: row 1, position 3") and f.value["count"] == 1
    assert fact(obs, "data.mask.binary") is False


def test_additive_mask_is_named(tmp_path):
    batch = bf.healthy_batch()
    batch["attention_mask"] = torch.where(batch["attention_mask"] == 1, 0.0, float("-inf"))
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"))
    assert "additive mask" in finding(obs, "data.mask.non_binary").message
    assert "data.has_nonfinite" not in ids_of(obs)  # -inf in an additive mask is the mask finding


@pytest.mark.parametrize("with_ckpt", [True, False])
def test_inverted_mask(tmp_path, ckpt, with_ckpt):
    batch = bf.healthy_batch()
    batch["attention_mask"] = 1 - batch["attention_mask"]
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"), ckpt if with_ckpt else None)
    f = finding(obs, "data.mask.inverted")
    assert f.severity == "error" and f.value["rows"] == 3 and f.value["pad_id"] == bf.PAD
    assert fact(obs, "data.mask.inverted") is True
    assert "data.mask.all_zero_rows" in ids_of(obs)  # row 0 is unpadded: all-zero once inverted


def test_all_zero_rows(tmp_path, ckpt):
    batch = bf.healthy_batch()
    batch["attention_mask"][2] = 0
    batch["labels"][2] = -100
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"), ckpt)
    assert finding(obs, "data.mask.all_zero_rows").severity == "warning"
    assert fact(obs, "data.mask.all_zero_rows") == 1
    assert fact(obs, "data.mask.inverted") is False


@pytest.mark.parametrize("side", ["left", "right"])
def test_padding_side(tmp_path, ckpt, side):
    obs = run(bf.save_pt(bf.healthy_batch(side=side), tmp_path / "b.pt"), ckpt)
    assert fact(obs, "data.padding_side") == side
    assert ids_of(obs, "error") == set()


def test_no_mask_with_left_padding_warns(tmp_path, ckpt):
    batch = bf.healthy_batch(side="left")
    del batch["attention_mask"]
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"), ckpt)
    assert finding(obs, "data.mask.missing").severity == "warning"
    assert fact(obs, "data.mask.missing") is True and fact(obs, "data.padding_side") == "left"
    assert fact(obs, "data.labels.pad_not_ignored") is False


# -------------------------------------------------------------------------------------- labels

def test_padding_not_ignored(tmp_path, ckpt):
    batch = bf.healthy_batch()
    batch["labels"] = batch["input_ids"].clone()
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"), ckpt)
    f = finding(obs, "data.labels.pad_not_ignored")
    assert f.severity == "error" and "row 1, position 21: label = 0" in f.message and f.value["rows"] == 3
    assert fact(obs, "data.labels.pad_not_ignored") is True


def test_no_target_tokens_in_batch_and_row(tmp_path, ckpt):
    batch = bf.healthy_batch()
    batch["labels"][:] = -100
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"), ckpt)
    f = finding(obs, "data.labels.no_target")
    assert f.severity == "error" and "NaN" in f.message
    assert fact(obs, "data.labels.no_target") is True and fact(obs, "data.labels.no_target_batch") is True
    batch = bf.healthy_batch()
    batch["labels"][1] = -100
    obs = run(bf.save_pt(batch, tmp_path / "c.pt"), ckpt)
    f = finding(obs, "data.labels.no_target")
    assert f.severity == "warning" and "row 1" in f.message
    assert fact(obs, "data.labels.no_target_rows") == 1 and fact(obs, "data.labels.no_target_batch") is False


def test_double_shifted_labels(tmp_path, ckpt):
    batch = bf.healthy_batch()
    ids, labels = batch["input_ids"], torch.full_like(batch["input_ids"], -100)
    keep = batch["attention_mask"].bool()
    labels[:, :-1] = torch.where(keep[:, 1:], ids[:, 1:], -100)
    batch["labels"] = labels
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"), ckpt)
    assert finding(obs, "data.labels.double_shifted").severity == "warning"
    assert fact(obs, "data.labels.double_shifted") is True


# ------------------------------------------------------------------------------ ids and floats

def test_token_out_of_range_with_vocab(tmp_path, ckpt):
    batch = bf.healthy_batch()
    batch["input_ids"][2, 5] = 70
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"), ckpt)
    f = finding(obs, "data.tokens.out_of_range")
    assert f.severity == "error" and "row 2, position 5: input_ids = 70" in f.message
    assert "device-side assert" in f.message and "[0, 64)" in f.message
    assert fact(obs, "data.tokens.out_of_range") is True


def test_token_range_without_vocab(tmp_path):
    batch = bf.healthy_batch()
    batch["input_ids"][0, 1] = 70
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"))
    assert "data.tokens.range_unchecked" in ids_of(obs) and "data.tokens.out_of_range" not in obs.facts
    batch["input_ids"][0, 1] = -5
    obs = run(bf.save_pt(batch, tmp_path / "c.pt"))
    assert fact(obs, "data.tokens.out_of_range") is True


def test_negative_label_other_than_ignore_index(tmp_path, ckpt):
    batch = bf.healthy_batch()
    batch["labels"] = batch["labels"].masked_fill(batch["labels"] == -100, -1)
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"), ckpt)
    assert "ignore_index" in finding(obs, "data.tokens.out_of_range").message
    assert fact(obs, "data.labels.pad_not_ignored") is True


def test_nonfinite_float_tensor(tmp_path, ckpt):
    batch = bf.healthy_batch()
    batch["loss_weights"] = torch.ones(4, 24)
    batch["loss_weights"][3, 7] = float("nan")
    obs = run(bf.save_safetensors(batch, tmp_path / "b.safetensors"), ckpt)
    f = finding(obs, "data.has_nonfinite")
    assert f.severity == "error" and f.value == {"tensor": "loss_weights", "count": 1, "first": [3, 7]}
    assert fact(obs, "data.has_nonfinite") is True


def test_double_bos_and_periodic_repeats(tmp_path, ckpt):
    batch = bf.healthy_batch(rows=2, width=80)
    batch["input_ids"][1, 1] = bf.BOS
    batch["input_ids"][0, 4:70] = torch.tensor([7, 8]).repeat(33)
    batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"), ckpt)
    assert "row 1" in finding(obs, "data.tokens.double_bos").message
    f = finding(obs, "data.tokens.periodic_repeats")
    assert "period 2, 33 repeats" in f.message and fact(obs, "data.repeats.rate") == 0.5


# ----------------------------------------------------------------------------------------- EOS

def test_missing_eos(tmp_path, ckpt):
    batch = bf.healthy_batch()
    ids = batch["input_ids"]
    batch["input_ids"] = ids.masked_fill(ids == bf.EOS, 9)
    batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"), ckpt)
    assert finding(obs, "data.eos.present").severity == "warning"
    assert fact(obs, "data.eos.present") is False


def test_eos_masked_by_pad_equals_eos_collator(tmp_path):
    ckpt = bf.make_checkpoint(tmp_path / "ck", pad=bf.EOS, tok_pad="</s>")
    batch = bf.healthy_batch(pad=bf.EOS)
    batch["labels"] = batch["input_ids"].masked_fill(batch["input_ids"] == bf.EOS, -100)
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"), ckpt)
    f = finding(obs, "data.eos.masked")
    assert f.severity == "error" and "pad id 2 is also EOS" in f.message and f.value["rows"] == 4
    assert fact(obs, "data.eos.masked") is True and fact(obs, "data.eos.present") is True


def test_eos_from_batch_key_without_checkpoint(tmp_path):
    batch = bf.healthy_batch()
    batch["eos_token_id"] = torch.tensor(bf.EOS)
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"))
    assert fact(obs, "data.eos.present") is True and "data.eos.skipped" not in ids_of(obs)
    obs = run(bf.save_pt(bf.healthy_batch(), tmp_path / "c.pt"))
    assert "data.eos.skipped" in ids_of(obs) and "data.eos.present" not in obs.facts


def test_eos_id_mismatch_between_files_is_reported_once(tmp_path):
    """The checkpoint's own files disagree: one finding, the config probe's, however many batches."""
    ckpt = bf.make_checkpoint(tmp_path / "ck", tok_eos="<|im_end|>", extra={"<|im_end|>": 64}, vocab=65)
    batches = [bf.save_pt(bf.healthy_batch(), tmp_path / f"b{i}.pt") for i in range(2)]
    obs = run_all(ProbeContext([detect(b) for b in batches] + [detect(ckpt)], static=True))
    eos = [f for f in obs.findings if "eos" in f.id and "mismatch" in f.id]
    assert [f.id for f in eos] == ["config.eos_mismatch"], eos
    assert eos[0].value["tokenizer_config.json"] == [64] and eos[0].value["generation_config.json"] == [2]
    assert obs.facts["model.eos_mismatch"].value is True and "data.eos.id_mismatch" not in obs.facts


def test_eos_id_mismatch_with_batch_key(tmp_path, ckpt):
    batch = bf.healthy_batch()
    batch["eos_token_id"] = torch.tensor(5)
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"), ckpt)
    assert finding(obs, "data.eos.id_mismatch").value["batch"] == [5]
    # a generation_config listing every end token is consistent
    ok = bf.make_checkpoint(tmp_path / "ok", tok_eos="<|im_end|>", extra={"<|im_end|>": 64}, vocab=65,
                            gen_eos=[2, 64])
    batch = bf.healthy_batch()
    batch["eos_token_id"] = torch.tensor(64)
    obs = run(bf.save_pt(batch, tmp_path / "c.pt"), ok)
    assert fact(obs, "data.eos.id_mismatch") is False


# ------------------------------------------------------------------------------ caps and errors

def test_caps_are_reported(tmp_path, ckpt, monkeypatch):
    monkeypatch.setattr(rows, "MAX_ROWS", 2)
    obs = run(bf.save_pt(bf.healthy_batch(rows=6), tmp_path / "b.pt"), ckpt)
    assert "first 2 of 6 rows" in finding(obs, "data.capped").message


def test_jsonl_rows_point_at_lines(tmp_path, ckpt):
    records = bf.records_from_batch(bf.healthy_batch())
    records[2]["input_ids"][3] = 99
    path = tmp_path / "b.jsonl"
    path.write_text("\n" + "".join(json.dumps(r) + "\n" for r in records))  # line 1 blank
    f = finding(run(path, ckpt), "data.tokens.out_of_range")
    assert "line 4, position 3: input_ids = 99" in f.message


def test_unreadable_files_fail_in_one_line(tmp_path):
    good = bf.save_safetensors(bf.healthy_batch(), tmp_path / "b.safetensors")
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(good.read_bytes()[:-40])
    garbage = tmp_path / "g.pt"
    garbage.write_bytes(b"PK\x03\x04 not really a zip")
    bad_ids = bf.save_jsonl([{"input_ids": [1, "x", 2]}], tmp_path / "bad.jsonl")
    for path in (cut, garbage, bad_ids):
        with pytest.raises(ArtifactError) as err:
            loader.read(path) if path.suffix == ".jsonl" else loader.sniff(path)
        assert "\n" not in str(err.value) and str(path) in str(err.value)


class Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_malicious_pickle_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps({"input_ids": Boom()}))
    with pytest.raises(UnsafePickleError) as err:
        loader.sniff(path)
    assert "refused" in str(err.value) and "\n" not in str(err.value)


def test_megatron_layout_and_stacked_micro_batches(tmp_path, ckpt):
    batch = bf.healthy_batch(width=32)
    ids, keep = batch["input_ids"], batch["attention_mask"]
    causal = torch.ones(32, 32).tril().bool().logical_not().expand(4, 1, 32, 32).clone()
    megatron = {"tokens": ids, "labels": torch.cat([ids[:, 1:], torch.zeros(4, 1, dtype=torch.long)], 1),
                "loss_mask": keep.float(), "attention_mask": causal}
    obs = run(bf.save_pt(megatron, tmp_path / "m.pt"), ckpt)
    assert ids_of(obs, "error") == set() and "data.mask.not_2d" in ids_of(obs)
    assert finding(obs, "data.labels.double_shifted").severity == "info"
    assert "data.labels.double_shifted" not in obs.facts
    stacked = {k: v.reshape(2, 2, -1) for k, v in bf.healthy_batch().items()}  # [accum, micro, T]
    obs = run(bf.save_pt(stacked, tmp_path / "s.pt"), ckpt)
    assert ids_of(obs, "error") | ids_of(obs, "warning") == set() and fact(obs, "data.mask.binary") is True


def test_bool_mask_and_metadata_eos_in_safetensors(tmp_path):
    batch = bf.healthy_batch()
    batch["attention_mask"] = batch["attention_mask"].bool()
    batch["input_ids"] = batch["input_ids"].int()
    obs = run(bf.save_safetensors(batch, tmp_path / "b.safetensors", metadata={"eos_token_id": "2"}))
    assert fact(obs, "data.mask.binary") is True and fact(obs, "data.eos.present") is True


def test_every_published_fact_is_registered():
    import re
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    registered = set(yaml.safe_load((root / "rules/_facts/data.yaml").read_text()))
    published = set()
    for module in ("batch.py", "labels.py", "text.py"):
        source = (root / "troubleshoot/probes/data" / module).read_text()
        published |= set(re.findall(r'publish\(obs, "([a-z_.]+)"', source))
        published |= set(re.findall(r'_rate\(obs, b, "([a-z_.]+)"', source))
    assert published and published <= registered, published - registered


@pytest.mark.parametrize("side,pad", [("left", bf.PAD), ("right", bf.EOS)])
def test_no_mask_padding_inferred_without_tokenizer_pad(tmp_path, side, pad):
    batch = bf.healthy_batch(side=side, pad=pad)
    batch["labels"] = batch["input_ids"].clone()  # pads not ignored
    del batch["attention_mask"]
    batch["eos_token_id"] = torch.tensor(bf.EOS)
    obs = run(bf.save_pt(batch, tmp_path / "b.pt"))
    assert fact(obs, "data.padding_side") == side and fact(obs, "data.mask.missing") is True
    assert fact(obs, "data.labels.pad_not_ignored") is True
    assert fact(obs, "data.eos.present") is True


def test_special_token_ids_per_file_without_running_code(tmp_path):
    from troubleshoot.loaders.tokenizer import special_token_ids, specials, vocab_sizes

    folder = tmp_path / "llama3"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"vocab_size": 128256, "eos_token_id": 128001,
                                                    "bos_token_id": 128000}))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [128001, 128009]}))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "added_tokens_decoder": {"128000": {"content": "<|begin_of_text|>"}, "128001": {"content": "<|end_of_text|>"},
                                 "128009": {"content": "<|eot_id|>"}},
        "bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|end_of_text|>", "__type": "AddedToken"},
        "pad_token": None, "chat_template": "{{ m['content'] }}<|eot_id|>"}))
    (folder / "special_tokens_map.json").write_text(json.dumps({"eos_token": "<|unknown|>"}))
    ids = special_token_ids(folder)
    assert ids["config.json"] == {"eos_token_id": 128001, "bos_token_id": 128000}
    assert ids["generation_config.json"] == {"eos_token_id": [128001, 128009]}
    assert ids["tokenizer_config.json"] == {"eos_token_id": 128001, "bos_token_id": 128000, "pad_token_id": None}
    assert ids["special_tokens_map.json"] == {"eos_token_id": None}  # string not in any table
    assert ids["chat_template"] == {"eos_token_id": [128009]}
    spec = specials(folder)
    assert spec.eos_ids == {128001, 128009} and spec.vocab == 128256 and spec.pad is None
    assert vocab_sizes(folder) == {"config.json": 128256}


def test_a_row_longer_than_the_cap_is_cut_and_said(tmp_path):
    """Memory is bounded by the token caps, not by the file: one 3M-token row is read as its first
    MAX_SEQ tokens, and the report says so."""
    width = rows.MAX_SEQ + 5
    path = tmp_path / "long.pt"
    torch.save({"input_ids": torch.randint(3, 100, (1, width)), "attention_mask": torch.ones(1, width, dtype=torch.long)},
               path)
    batch = loader.read(path)
    assert batch.seqs["input_ids"].shape == (1, rows.MAX_SEQ)
    assert batch.seqs["attention_mask"].shape == (1, rows.MAX_SEQ)
    assert any(f"cut at {rows.MAX_SEQ}" in note for note in batch.notes), batch.notes
