"""Gradient-flow probe: each injected fault is found with the right finding and fact.

Models come from tests/modelfactory.py (hand-written nn.Modules, also used as --model-factory
targets) and tiny transformers configs saved to tmp folders; nothing is downloaded.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from troubleshoot.errors import LlmfixError  # noqa: E402
from troubleshoot.probes.forward import caps as model_loader  # noqa: E402
from troubleshoot.observations import Artifact, Observations  # noqa: E402
from troubleshoot.probes import ProbeContext
from troubleshoot.probes.forward import gradflow, masks  # noqa: E402

HERE = Path(__file__).parent
FACTORY = HERE / "modelfactory.py"
ROOT = HERE.parent


def factory(name: str, **kw) -> ProbeContext:
    return ProbeContext([], model_factory=f"{FACTORY}:{name}", **kw)


def by_id(obs: Observations) -> dict:
    return {f.id: f for f in obs.findings}


def errors(obs: Observations) -> list:
    return [f"{f.id}: {f.message}" for f in obs.findings if f.severity == "error"]


def facts(obs: Observations) -> dict:
    return {k: v.value for k, v in obs.facts.items()}


# --- hand-written models ----------------------------------------------------------------------

def test_healthy_model_has_no_error_and_reports_what_it_checked():
    obs = gradflow.run(factory("correct_lm"))
    assert errors(obs) == []
    found = by_id(obs)
    for fid in ("grads.trainable", "forward.loss", "forward.activation_range", "grads.profile",
                "forward.init_loss"):
        assert found[fid].severity == "info", fid
    f = facts(obs)
    assert f["forward.loss_finite"] is True and f["grads.nonfinite"] is False
    assert f["grads.trainable_fraction"] == 1.0 and f["grads.dead_layers"] is False
    assert f["forward.fp16_overflow_risk"] is False
    assert abs(f["forward.initial_loss_gap"]) < 1.0   # fresh model: loss ~ ln(vocab)
    assert set(found["grads.profile"].value["layers"]) >= {"blocks.0", "blocks.1"}


def test_all_parameters_frozen():
    obs = gradflow.run(factory("frozen_lm"))
    assert by_id(obs)["grads.frozen"].severity == "error"
    assert facts(obs)["grads.trainable_fraction"] == 0.0


def test_adapter_only_training_is_fine():
    obs = gradflow.run(factory("adapter_lm"))
    assert errors(obs) == []
    assert 0 < facts(obs)["grads.trainable_fraction"] < 0.05
    assert "adapter" in by_id(obs)["grads.trainable"].message
    assert "grads.zero" not in by_id(obs)  # lora_A has zero grad while lora_B is still zero
    assert facts(obs)["grads.zero_params"] == 0 and facts(obs)["grads.none_params"] == 0


def test_dead_layer():
    obs = gradflow.run(factory("dead_layer_lm"))
    dead = by_id(obs)["grads.dead_layers"]
    assert dead.severity == "error" and list(dead.value) == ["blocks.1"]
    assert facts(obs)["grads.dead_layers"] is True


def test_fp16_overflow_risk_seen_in_fp32():
    obs = gradflow.run(factory("fp16_overflow_lm"))
    risk = by_id(obs)["forward.fp16_overflow_risk"]
    assert risk.severity == "warning" and "blocks.0.mlp.scale" in risk.where
    assert facts(obs)["forward.fp16_overflow_risk"] is True
    assert facts(obs)["forward.activation_absmax"] > 65504
    assert facts(obs)["forward.loss_finite"] is True


def test_fp16_model_overflows_in_its_own_dtype():
    obs = gradflow.run(factory("fp16_overflow_half_lm"))
    found = by_id(obs)
    assert found["forward.loss_nonfinite"].severity == "error"
    assert "low-precision" in found["forward.loss_nonfinite"].message  # fp32 pass is finite
    assert facts(obs)["forward.first_nonfinite_module"] == "blocks.0.mlp.scale"
    assert found["forward.fp16_overflow_risk"].severity == "error"
    assert facts(obs)["forward.loss_finite_fp32"] is True


def test_nan_weight_points_at_its_layer():
    obs = gradflow.run(factory("nan_weight_lm"))
    found = by_id(obs)
    assert facts(obs)["forward.loss_finite"] is False
    assert facts(obs)["forward.first_nonfinite_module"] == "blocks.1.mlp.fc1"
    first = found["forward.first_nonfinite_module"]
    assert first.severity == "error" and "weights hold NaN" in first.message
    frames = first.value["frames"]
    assert frames[-1]["module"] == "blocks.1.mlp.fc1" and frames[-1]["weight_nonfinite"] is True
    assert len(frames) <= 5 and math.isfinite(frames[0]["output_absmax"])
    assert found["grads.nonfinite"].severity == "error"
    assert facts(obs)["weights.nonfinite"] is True  # the built model itself: no weight file to read


def test_results_are_deterministic():
    a, b = (facts(gradflow.run(factory("correct_lm"))) for _ in range(2))
    assert a["grads.global_norm"] == b["grads.global_norm"]


# --- --model-factory forms and errors -----------------------------------------------------------

def test_factory_as_module_colon_callable(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    obs = gradflow.run(ProbeContext([], model_factory="modelfactory:dead_layer_lm"))
    assert "grads.dead_layers" in by_id(obs)


@pytest.mark.parametrize("spec, words", [
    ("no_colon_here", "expected module:callable"),
    ("llmfix_no_such_module_xyz:build", "no module named"),
    (f"{HERE / 'no_such_file.py'}:build", "no such file"),
    (f"{FACTORY}:no_such_callable", "no attribute"),
    (f"{FACTORY}:not_a_module", "expected a torch.nn.Module"),
    (f"{FACTORY}:VOCAB", "not callable"),
])
def test_factory_errors_are_one_line(spec, words):
    with pytest.raises(LlmfixError) as err:
        gradflow.run(ProbeContext([], model_factory=spec))
    assert words in str(err.value) and "--model-factory" in str(err.value)
    assert "\n" not in str(err.value)


# --- switches, caps, batches --------------------------------------------------------------------

def test_no_model_source_gives_nothing():
    ctx = ProbeContext([Artifact("train.log", "log")])
    assert gradflow.run(ctx).findings == [] and masks.run(ctx).findings == []


def test_static_skips_once_for_both_probes():
    ctx = factory("nan_weight_lm", static=True)
    obs = gradflow.run(ctx).merge(masks.run(ctx))
    assert [f.id for f in obs.findings] == ["forward.skipped"]
    assert obs.findings[0].severity == "info" and "--static" in obs.findings[0].message


def test_above_caps_says_how_to_run_anyway(monkeypatch):
    monkeypatch.setattr(model_loader, "CPU_MAX_PARAMS", 1000)
    obs = gradflow.run(factory("nan_weight_lm", device="cpu"))
    skip = by_id(obs)["forward.skipped"]
    assert skip.severity == "info" and "--forward" in skip.message and "cap" in skip.message
    forced = gradflow.run(factory("nan_weight_lm", device="cpu", forward=True))
    assert "forward.first_nonfinite_module" in by_id(forced)


def test_device_selection():
    assert model_loader.resolve_device("cpu").type == "cpu"
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert model_loader.resolve_device("auto").type == expected
    if not torch.cuda.is_available():
        with pytest.raises(LlmfixError, match="--device cuda"):
            model_loader.resolve_device("cuda")


def test_jsonl_token_rows_are_read_through_the_batch_loader(tmp_path):
    rows = ['{"input_ids": [1, 2, 3, 4, 5, 6]}', '{"input_ids": [7, 8, 9]}']
    (tmp_path / "b.jsonl").write_text("\n".join(rows) + "\n")
    obs = gradflow.run(ProbeContext([Artifact(str(tmp_path / "b.jsonl"), "batch")],
                                    model_factory=f"{FACTORY}:correct_lm"))
    assert "b.jsonl (2x6 tokens)" in by_id(obs)["forward.loss"].message and errors(obs) == []


def test_user_batch_is_used_and_bad_ids_fall_back(tmp_path):
    ids = torch.randint(0, 64, (3, 20))
    torch.save({"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}, tmp_path / "b.pt")
    obs = gradflow.run(ProbeContext([Artifact(str(tmp_path / "b.pt"), "batch")],
                                    model_factory=f"{FACTORY}:correct_lm"))
    assert "b.pt (3x20 tokens)" in by_id(obs)["forward.loss"].message
    torch.save({"input_ids": ids + 1000}, tmp_path / "bad.pt")
    obs = gradflow.run(ProbeContext([Artifact(str(tmp_path / "bad.pt"), "batch")],
                                    model_factory=f"{FACTORY}:correct_lm"))
    assert "synthetic tokens" in by_id(obs)["forward.loss"].message and errors(obs) == []


def test_a_large_user_batch_is_cut_to_the_caps(tmp_path, monkeypatch):
    monkeypatch.setattr(model_loader, "CPU_MAX_TOKENS", 60)
    ids = torch.randint(0, 64, (5, 40))
    torch.save({"input_ids": ids, "attention_mask": torch.ones(5, 40, dtype=torch.bool)}, tmp_path / "b.pt")
    obs = gradflow.run(ProbeContext([Artifact(str(tmp_path / "b.pt"), "batch")], device="cpu",
                                    model_factory=f"{FACTORY}:correct_lm"))
    assert "b.pt (1x40 tokens of 5x40, cut to the caps)" in by_id(obs)["forward.loss"].message


def test_published_facts_are_registered():
    import yaml

    registry: dict = {}
    for path in (ROOT / "rules" / "_facts").glob("*.yaml"):
        registry |= yaml.safe_load(path.read_text())
    for name in ("correct_lm", "nan_weight_lm", "fp16_overflow_half_lm", "dead_layer_lm", "frozen_lm"):
        assert set(gradflow.run(factory(name)).facts) <= set(registry), name
        assert set(masks.run(factory(name)).facts) <= set(registry), name


# --- transformers checkpoints -------------------------------------------------------------------

@pytest.fixture(scope="module")
def hf():
    pytest.importorskip("transformers")
    import modelfactory

    return modelfactory


def _checkpoint(tmp_path, model, hf) -> ProbeContext:
    folder = tmp_path / "ckpt"
    hf.save_hf(model, folder)
    return ProbeContext([Artifact(str(folder), "hf-checkpoint")])


@pytest.mark.parametrize("arch", ["tiny_gpt2", "tiny_llama", "tiny_bert"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_healthy_transformers_checkpoints(tmp_path, hf, arch, dtype):
    torch.manual_seed(0)
    ctx = _checkpoint(tmp_path, getattr(hf, arch)(getattr(torch, dtype)), hf)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in Path(ctx.artifacts[0].path).iterdir())
    obs = gradflow.run(ctx)
    assert errors(obs) == []
    assert facts(obs)["grads.none_params"] == 0 and facts(obs)["forward.loss_finite_fp32"] is True
    if dtype == "bfloat16":
        assert "bfloat16" in by_id(obs)["forward.loss"].message  # ran in the checkpoint's dtype
    assert before == sorted((p.name, p.stat().st_mtime_ns) for p in Path(ctx.artifacts[0].path).iterdir())


def test_transformers_nan_weight(tmp_path, hf):
    torch.manual_seed(0)
    model = hf.tiny_gpt2()
    with torch.no_grad():
        model.transformer.h[1].mlp.c_fc.weight[3, 5] = float("nan")
    obs = gradflow.run(_checkpoint(tmp_path, model, hf))
    assert facts(obs)["forward.first_nonfinite_module"] == "transformer.h.1.mlp.c_fc"
    assert by_id(obs)["forward.loss_nonfinite"].severity == "error"


def test_transformers_activation_overflow(tmp_path, hf):
    torch.manual_seed(0)
    model = hf.tiny_llama()
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight.mul_(1e5)
    obs = gradflow.run(_checkpoint(tmp_path, model, hf))
    assert facts(obs)["forward.fp16_overflow_risk"] is True
    assert "model.layers.0.mlp" in by_id(obs)["forward.fp16_overflow_risk"].where
