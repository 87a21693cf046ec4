"""`llmfix probe` end to end: each injected fault ends with the right cause ranked first.

The probe families have their own tests for findings and facts; these check the whole chain
artifact -> loader -> probe -> facts -> engine -> JSON, through the CLI (`--static`: the
model-running probes have their own end-to-end tests in test_probe_e2e_model.py).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import batchfactory as B
import ckptfactory as F
from troubleshoot import cli


def probe(*paths: Path, extra: tuple[str, ...] = ()) -> tuple[int, dict]:
    result = CliRunner().invoke(cli.main, ["probe", "--json", "--static", *map(str, paths), *extra])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)
    assert not [f for f in data["findings"] if f["id"] == "probe.crashed"], data["findings"]
    return result.exit_code, data


def top(data: dict) -> str:
    return data["causes"][0]["id"] if data["causes"] else ""


def finding_ids(data: dict, severities=("error", "warning")) -> set[str]:
    return {f["id"] for f in data["findings"] if f["severity"] in severities}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return B.make_checkpoint(tmp_path_factory.mktemp("e2e") / "ckpt")


def batch_with(fault, **kwargs) -> dict:
    batch = B.healthy_batch(**kwargs)
    fault(batch)
    return batch


def _eos_to_word(b):
    b["input_ids"][b["input_ids"] == B.EOS] = 7
    b["labels"] = b["input_ids"].masked_fill(b["attention_mask"] == 0, -100)


BATCH_FAULTS = {
    "mask-error.non-binary": (lambda b: b["attention_mask"].__setitem__((1, 3), 2), "data.mask.non_binary"),
    "mask-error.inverted": (lambda b: b.__setitem__("attention_mask", 1 - b["attention_mask"]), "data.mask.inverted"),
    "mask-error.padding-not-ignored": (lambda b: b.__setitem__("labels", b["input_ids"].clone()), "data.labels.pad_not_ignored"),
    "nan-loss.no-target-tokens": (lambda b: b["labels"].fill_(-100), "data.labels.no_target"),
    "nan-loss.token-out-of-range": (lambda b: b["input_ids"].__setitem__((0, 2), 500), "data.tokens.out_of_range"),
    "nan-loss.nonfinite-data": (lambda b: b.__setitem__("loss_weights", torch.tensor([1.0, float("nan"), 1.0, 1.0])), "data.has_nonfinite"),
    "repetition.missing-eos": (_eos_to_word, "data.eos.present"),
    "repetition.eos-masked": (lambda b: b["labels"].masked_fill_(b["input_ids"] == B.EOS, -100), "data.eos.masked"),
}


@pytest.mark.parametrize("expected", list(BATCH_FAULTS))
def test_batch_fault_ranks_its_cause_first(tmp_path, ckpt, expected):
    fault, finding = BATCH_FAULTS[expected]
    path = B.save_pt(batch_with(fault), tmp_path / "batch.pt")
    code, data = probe(path, ckpt)
    assert finding in finding_ids(data)
    assert top(data) == expected, [c["id"] for c in data["causes"][:3]]
    assert code == 1


def test_eos_config_mismatch(tmp_path):
    folder = B.make_checkpoint(tmp_path / "ckpt", gen_eos=[5])
    code, data = probe(B.save_pt(B.healthy_batch(), tmp_path / "b.pt"), folder)
    assert top(data) == "repetition.eos-config-mismatch"


def test_healthy_batch_and_checkpoint_find_nothing(tmp_path, ckpt):
    code, data = probe(B.save_pt(B.healthy_batch(), tmp_path / "batch.pt"), ckpt)
    assert not finding_ids(data, ("error",)) and data["causes"] == [] and code == 0


def test_nan_weight_is_nonfinite_weights(fresh):
    folder = F.edit_safetensors(fresh("gpt2-safetensors"),
                                lambda n, t: t.index_put_((torch.tensor([0]),), torch.tensor(float("nan")))
                                if n.endswith("h.0.attn.c_attn.weight") else None)
    code, data = probe(folder)
    assert "weights.nonfinite" in finding_ids(data) and top(data) == "nan-loss.nonfinite-weights" and code == 1


def test_inflated_init_is_bad_init(tmp_path):
    folder = F.save_hf(F.gpt2(initializer_range=0.5), tmp_path / "big-init", tok=F.tokenizer())
    code, data = probe(folder)
    assert top(data) == "bad-init.std-too-large"
    steps = " ".join(s for f in data["causes"][0]["fixes"] for s in f["steps"])
    assert "0.07906" in steps  # sqrt(2/(5*64)) computed from the probed hidden size


def test_unscaled_output_layers(fresh):
    folder = F.edit_safetensors(fresh("gpt2-safetensors"),
                                lambda n, t: t * 2.83 if n.endswith(("attn.c_proj.weight", "mlp.c_proj.weight")) else None)
    code, data = probe(folder)
    assert top(data) == "bad-init.output-layers-unscaled", [c["id"] for c in data["causes"][:3]]


def test_healthy_checkpoints_find_nothing_wrong(fresh):
    code, data = probe(fresh("gpt2-safetensors"))
    assert not finding_ids(data, ("error",)) and data["causes"] == [] and code == 0


def test_a_crashing_probe_is_an_error_not_silence(tmp_path, ckpt, monkeypatch):
    """A family that raises: an error finding naming it and the exception, the other families'
    findings kept, exit 1, and never "Nothing wrong found"."""
    from troubleshoot.probes import optimizer

    def broken(ctx):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(optimizer, "run", broken)
    batch = B.save_pt(batch_with(lambda b: b["attention_mask"].__setitem__((1, 3), 2)), tmp_path / "b.pt")
    result = CliRunner().invoke(cli.main, ["probe", "--json", "--static", str(batch), str(ckpt)])
    data = json.loads(result.stdout)
    crashed = [f for f in data["findings"] if f["id"] == "probe.crashed"]
    assert result.exit_code == 1 and len(crashed) == 1 and crashed[0]["severity"] == "error"
    assert "optimizer" in crashed[0]["message"] and "ZeroDivisionError: division by zero" in crashed[0]["message"]
    assert "data.mask.non_binary" in finding_ids(data)  # found by a family that did not crash
    healthy = B.save_pt(B.healthy_batch(), tmp_path / "ok.pt")
    result = CliRunner().invoke(cli.main, ["probe", "--static", str(healthy), str(ckpt)])
    assert result.exit_code == 1 and "probe.crashed" in result.output
    assert "Nothing wrong found" not in result.output


def test_families_publish_only_what_they_declare(tmp_path, ckpt):
    """PUBLISHES is what kb lint trusts: every fact a family really publishes must be in it."""
    import logfactory as LF
    from troubleshoot.loaders import detect
    from troubleshoot.probes import FAMILIES, ProbeContext, family_module, publishes

    log = LF.write_megatron(tmp_path / "train.log", LF.simulate(LF.Run(iters=3000, interval=10, seed=3,
                                                                       spikes=[LF.Spike(2000, 2.0)])))
    batch = B.save_pt(B.healthy_batch(), tmp_path / "b.pt")
    ctx = ProbeContext([detect(p) for p in (ckpt, batch, log)], device="cpu")
    declared = publishes()
    seen = set()
    for name, _ in FAMILIES:
        facts = family_module(name).run(ctx).facts
        assert set(facts) <= set(declared[name]), (name, set(facts) - set(declared[name]))
        seen |= {name} if facts else set()
    assert seen == {"config", "weights", "logs", "batch", "gradflow", "masks"}, seen
