"""Checkpoint loaders: every layout recognised by content, broken inputs give one clear line."""
from __future__ import annotations

import json
import warnings

import ckptfactory as F
import pytest
import torch

from troubleshoot.errors import ArtifactError
from troubleshoot.loaders import checkpoint, detect
from troubleshoot.loaders.checkpoint import iter_weights, open_checkpoint, weight_shapes
from troubleshoot.loaders.tensors import iter_safetensors, list_safetensors, unwrap_state_dict

warnings.filterwarnings("ignore", category=UserWarning)


@pytest.mark.parametrize("name,kind,detail", [
    ("gpt2-safetensors", "hf-checkpoint", "model.safetensors"),
    ("gpt2-sharded", "hf-checkpoint", "safetensors shards"),
    ("gpt2-bin", "hf-checkpoint", "pytorch_model.bin"),
    ("gpt2-bin-sharded", "hf-checkpoint", "3 bin shards"),
    ("llama-safetensors", "hf-checkpoint", "model.safetensors"),
    ("llama-sharded", "hf-checkpoint", "safetensors shards"),
    ("trainer-output", "hf-checkpoint", "probing checkpoint-6 (also checkpoint-3)"),
    ("megatron-deepspeed", "megatron-checkpoint", "global_step200"),
    ("megatron-lm", "megatron-checkpoint", "iter_0000300"),
])
def test_layouts_recognised(art, name, kind, detail):
    a = detect(art(name))
    assert (a.kind, a.path) == (kind, str(art(name)))
    assert detail in a.detail


def test_sharded_and_single_hold_the_same_tensors(art):
    one = {n: t.clone() for _, n, t in iter_weights(open_checkpoint(art("gpt2-safetensors")))}
    for name in ("gpt2-sharded", "gpt2-bin", "gpt2-bin-sharded"):
        other = {n: t.clone() for _, n, t in iter_weights(open_checkpoint(art(name)))}
        assert set(other) == set(one)
        assert all(torch.equal(other[k], one[k]) for k in one)


def test_trainer_output_dir(art):
    ckpt = open_checkpoint(art("trainer-output"))
    assert ckpt.root.name == "checkpoint-6" and ckpt.iterations == [3, 6]
    assert (ckpt.iteration, ckpt.iteration_source) == (6, "checkpoint-6/trainer_state.json global_step")
    assert [f.name for f in ckpt.optimizer_files] == ["optimizer.pt"] and ckpt.scheduler_file.name == "scheduler.pt"
    skipped = {f.name for f, _ in ckpt.skipped}
    assert skipped == {"training_args.bin", "rng_state.pth"}
    ids = {(i.id, i.severity, i.where) for i in ckpt.issues}
    assert ("checkpoint.unsafe_pickle_skipped", "info", "checkpoint-6/training_args.bin") in ids
    single = detect(art("trainer-output") / "checkpoint-3")
    assert single.detail.startswith("Trainer checkpoint-3")


def test_megatron_deepspeed(art):
    ckpt = open_checkpoint(art("megatron-deepspeed"))
    assert ckpt.iterations == [100, 200] and ckpt.root.name == "global_step200"
    assert ckpt.iteration == 200 and ckpt.config["hidden_size"] == 64  # args Namespace read safely
    assert sorted(f.name for f in ckpt.weight_files) == [
        "layer_01-model_00-model_states.pt", "layer_03-model_00-model_states.pt",
        "layer_04-model_00-model_states.pt", "layer_06-model_00-model_states.pt"]
    assert [f.name for f in ckpt.optimizer_files] == ["bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"]
    refused = [i for i in ckpt.issues if i.id == "checkpoint.unsafe_pickle_refused"]
    assert [i.where for i in refused] == ["global_step200/zero_pp_rank_1_mp_rank_00_optim_states.pt"]
    assert "LossScaler" in refused[0].message


def test_megatron_lm_nested_names(art):
    ckpt = open_checkpoint(art("megatron-lm"))
    names = weight_shapes(ckpt)
    assert names["language_model.embedding.word_embeddings.weight"] == (128, 64)
    assert "language_model.encoder.layers.1.mlp.dense_4h_to_h.weight" in names
    assert not any(n.startswith("optimizer") for n in names)
    bare = detect(next(art("megatron-lm").rglob("model_optim_rng.pt")))
    assert bare.kind == "state-dict"


def test_latest_points_to_missing_iteration(tmp_path):
    root = F.megatron_deepspeed(tmp_path / "ds", iterations=(100, 200), latest=300)
    ckpt = open_checkpoint(root)
    errors = [i for i in ckpt.issues if i.id == "checkpoint.latest_missing"]
    assert {i.where.split("/")[-1] for i in errors} == {"latest", "latest_checkpointed_iteration.txt"}
    assert all(i.severity == "error" and "global_step100, global_step200" in i.message for i in errors)
    assert ckpt.root.name == "global_step200"  # fell back to the newest on disk, and says so
    assert any(i.id == "checkpoint.latest_fallback" for i in ckpt.issues)


def test_latest_missing_and_nothing_on_disk(tmp_path):
    (tmp_path / "latest").write_text("global_step5")
    with pytest.raises(ArtifactError, match="no iteration folder"):
        detect(tmp_path)


def test_megatron_with_nothing_readable(tmp_path):
    d = tmp_path / "global_step10"
    d.mkdir()
    torch.save({"module": {"w": torch.zeros(2)}, "args": F.megatron_args(x=F.LossScaler())}, d / "mp_rank_00_model_states.pt")
    (tmp_path / "latest").write_text("global_step10")
    with pytest.raises(ArtifactError, match="nothing could be read safely: mp_rank_00_model_states.pt: refused"):
        detect(tmp_path)


def test_bare_state_dicts(tmp_path, art):
    sd = {k: v for _, k, v in iter_weights(open_checkpoint(art("gpt2-safetensors")))}
    nested = tmp_path / "nested.pt"
    torch.save({"model": {"state_dict": sd}, "epoch": 3}, nested)
    a = detect(nested)
    assert a.kind == "state-dict" and f"{len(sd)} tensors" in a.detail
    assert detect(art("gpt2-safetensors") / "model.safetensors").kind == "state-dict"
    assert detect(art("gpt2-bin") / "pytorch_model.bin").kind == "state-dict"
    module = tmp_path / "module.bin"
    torch.save({"module": sd}, module)
    assert set(unwrap_state_dict(torch.load(module, weights_only=True))) == set(sd)


def test_lone_optimizer_and_scheduler_states(art):
    ck = art("trainer-output") / "checkpoint-6"
    assert detect(ck / "optimizer.pt").detail == "optimizer state"
    assert detect(ck / "scheduler.pt").detail == "LR scheduler state"


def test_batch_is_not_a_checkpoint(tmp_path):
    batch = tmp_path / "batch.pt"
    torch.save({"input_ids": torch.zeros(2, 8, dtype=torch.long), "attention_mask": torch.ones(2, 8)}, batch)
    assert checkpoint.sniff(batch) is None
    from safetensors.torch import save_file
    save_file({"input_ids": torch.zeros(2, 8, dtype=torch.long)}, str(tmp_path / "b.safetensors"))
    assert checkpoint.sniff(tmp_path / "b.safetensors") is None


def test_streamed_tensors_are_private_copies(art, tmp_path_factory):
    """Tensors come from copy-on-write maps: writing to one never reaches the file."""
    f = F.copy(art("gpt2-safetensors"), tmp_path_factory, "cow") / "model.safetensors"
    before = f.read_bytes()
    for _, t in iter_safetensors(f):
        t.add_(1.0)
    assert f.read_bytes() == before
    infos = list_safetensors(f)
    assert infos == sorted(infos, key=lambda i: i.start) and infos[0].nbytes > 0


# --- one clear line for broken input ------------------------------------------------------------

def _one_line(err: Exception, needle: str) -> None:
    text = str(err)
    assert "\n" not in text and "Traceback" not in text and needle in text, text


def test_nonexistent_and_empty(tmp_path):
    with pytest.raises(ArtifactError) as e:
        detect(tmp_path / "nope")
    _one_line(e.value, "nope: no such file or directory")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArtifactError) as e:
        detect(tmp_path / "empty")
    _one_line(e.value, "empty directory")


@pytest.mark.parametrize("cut", [4, 40, -100])
def test_truncated_safetensors(art, tmp_path, cut):
    src = (art("gpt2-safetensors") / "model.safetensors").read_bytes()
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(src[:cut])
    with pytest.raises(ArtifactError) as e:
        detect(bad)
    _one_line(e.value, f"{bad}: ")
    assert "truncated" in str(e.value) or "corrupt" in str(e.value)


def test_truncated_shard_in_folder_names_the_shard(art, tmp_path_factory):
    folder = F.copy(art("gpt2-sharded"), tmp_path_factory, "trunc")
    shard = sorted(folder.glob("*.safetensors"))[2]
    shard.write_bytes(shard.read_bytes()[:-50])
    with pytest.raises(ArtifactError) as e:
        detect(folder)
    _one_line(e.value, f"{shard}: truncated safetensors file")


def test_corrupt_header(tmp_path):
    bad = tmp_path / "x.safetensors"
    bad.write_bytes((20).to_bytes(8, "little") + b"{not json at all!!}" + b"\0" * 40)
    with pytest.raises(ArtifactError) as e:
        detect(bad)
    _one_line(e.value, "corrupt safetensors header")


def test_missing_config(art, tmp_path_factory):
    folder = F.copy(art("gpt2-safetensors"), tmp_path_factory, "noconfig")
    (folder / "config.json").unlink()
    with pytest.raises(ArtifactError) as e:
        detect(folder)
    _one_line(e.value, "no config.json beside model.safetensors")


def test_corrupt_config_and_missing_shard(art, tmp_path_factory):
    folder = F.copy(art("gpt2-sharded"), tmp_path_factory, "badcfg")
    (folder / "config.json").write_text("{oops")
    with pytest.raises(ArtifactError) as e:
        detect(folder)
    _one_line(e.value, "config.json: unreadable JSON")
    folder = F.copy(art("gpt2-sharded"), tmp_path_factory, "noshard")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    missing = sorted(set(index["weight_map"].values()))[1]
    (folder / missing).unlink()
    issue, = [i for i in open_checkpoint(folder).issues if i.id == "checkpoint.bad_index"]
    assert issue.severity == "error" and issue.where == "model.safetensors.index.json"
    assert f"names shard {missing!r}, not in the folder" in issue.message  # the other shards are still probed


def test_corrupt_pickle(tmp_path):
    bad = tmp_path / "model.pt"
    bad.write_bytes(b"PK\x03\x04 this is not really a zip")
    with pytest.raises(ArtifactError) as e:
        detect(bad)
    _one_line(e.value, "cannot read torch file")


def test_the_open_checkpoint_cache_is_bounded(tmp_path):
    paths = []
    for i in range(checkpoint.CACHE_SIZE + 3):
        paths.append(tmp_path / f"sd{i}.pt")
        torch.save({"w": torch.zeros(2)}, paths[-1])
        open_checkpoint(paths[-1])
    assert len(checkpoint._CACHE) == checkpoint.CACHE_SIZE
    assert open_checkpoint(paths[-1]) is open_checkpoint(paths[-1])  # the newest stay cached
