"""Safety: pickles that would run code are refused and nothing in them runs; probes never write."""
from __future__ import annotations

import hashlib
import os
import warnings

import pytest
import torch

import ckptfactory as F
from troubleshoot.errors import ArtifactError, UnsafePickleError
from troubleshoot.loaders import detect
from troubleshoot.loaders.checkpoint import open_checkpoint
from troubleshoot.probes import ProbeContext, run_all, weights

warnings.filterwarnings("ignore", category=UserWarning)


def run_probes(path):
    """Every static probe with the loader's own findings."""
    return run_all(ProbeContext([detect(path)], static=True))


def test_marker_bomb_would_really_fire(tmp_path):
    """The payload is live: an unsafe load creates the marker (so its absence below means something)."""
    marker = tmp_path / "ran"
    F.malicious_pt(tmp_path / "evil.pt", marker)
    torch.load(tmp_path / "evil.pt", weights_only=False)
    assert marker.exists()


def test_malicious_bare_pickle_refused(tmp_path):
    marker = tmp_path / "ran"
    evil = F.malicious_pt(tmp_path / "evil.pt", marker)
    with pytest.raises(UnsafePickleError) as e:
        detect(evil)
    assert "refused" in str(e.value) and "nothing in it was run" in str(e.value) and "it needs io.open" in str(e.value)
    assert "\n" not in str(e.value)
    assert not marker.exists()


def test_malicious_weights_in_hf_folder(art, tmp_path_factory):
    folder = F.copy(art("gpt2-bin"), tmp_path_factory, "evil-hf")
    marker = folder / "ran"
    F.malicious_pt(folder / "pytorch_model.bin", marker)
    obs = run_probes(folder)
    refused = [f for f in obs.findings if f.id == "checkpoint.unsafe_pickle_refused"]
    assert [f.where for f in refused] == ["pytorch_model.bin"]
    assert "model.hidden_size" in obs.facts  # the config was still read
    assert not marker.exists()


def test_malicious_files_in_trainer_and_megatron_folders(art, tmp_path_factory):
    out = F.copy(art("trainer-output"), tmp_path_factory, "evil-trainer")
    marker = out / "ran"
    ck = out / "checkpoint-6"
    for name in ("training_args.bin", "rng_state.pth", "optimizer.pt", "scheduler.pt"):
        F.malicious_pt(ck / name, marker)
    obs = run_probes(out)
    where = {f.where for f in obs.findings if f.id == "optimizer.unreadable"}
    assert where == {"checkpoint-6/optimizer.pt"}
    assert not marker.exists()
    with pytest.raises(ArtifactError, match="never loaded"):
        detect(ck / "training_args.bin")
    assert not marker.exists()

    ds = F.copy(art("megatron-deepspeed"), tmp_path_factory, "evil-ds")
    F.malicious_pt(ds / "global_step200" / "layer_03-model_00-model_states.pt", marker)
    obs = run_probes(ds)
    refused = {f.where for f in obs.findings if f.id == "checkpoint.unsafe_pickle_refused"}
    assert "global_step200/layer_03-model_00-model_states.pt" in refused
    assert "weights.nonfinite" in obs.facts  # the other layers were still read
    assert not marker.exists()


def _hashes(root):
    root = root if root.is_dir() else root.parent
    return {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", F.HEALTHY + ("megatron-lm",))
def test_probes_never_modify_artifacts(art, name):
    path = art(name)
    before = _hashes(path)
    run_probes(path)
    # a second pass through the cache and a bare-file probe too
    run_probes(path)
    assert _hashes(path) == before


def test_read_only_artifacts_are_fine(art, tmp_path_factory):
    folder = F.copy(art("trainer-output"), tmp_path_factory, "ro")
    for p in folder.rglob("*"):
        os.chmod(p, 0o555 if p.is_dir() else 0o444)
    try:
        obs = run_probes(folder)
        assert obs.facts["weights.nonfinite"].value is False and obs.facts["optimizer.step"].value == 6
    finally:
        for p in folder.rglob("*"):
            os.chmod(p, 0o755 if p.is_dir() else 0o644)


def test_streaming_keeps_no_tensor_alive(art):
    """The weights probe keeps numbers, not tensors: after a run no mapping of the file remains."""
    import gc

    from troubleshoot.loaders.tensors import file_maps

    ckpt = open_checkpoint(art("gpt2-sharded"))
    weights.run(ProbeContext([detect(art("gpt2-sharded"))]))
    gc.collect()
    assert not any(file_maps(f) for f in ckpt.weight_files)
