"""Optimizer probe on a real HF Trainer run and Megatron/DeepSpeed optimizer states."""
from __future__ import annotations

import json
import warnings

import ckptfactory as F
import pytest
import torch

from troubleshoot.loaders import detect
from troubleshoot.probes import ProbeContext, optimizer

warnings.filterwarnings("ignore", category=UserWarning)


def probe(path):
    return optimizer.run(ProbeContext([detect(path)]))


def values(obs):
    return {k: f.value for k, f in obs.facts.items()}


def found(obs, id):
    return [f for f in obs.findings if f.id == id]


def test_trainer_checkpoint(art):
    obs = probe(art("trainer-output"))
    v = values(obs)
    assert (v["optimizer.beta1"], v["optimizer.beta2"], v["optimizer.eps"]) == (0.9, 0.999, 1e-8)
    assert v["optimizer.weight_decay"] == 0.1 and v["optimizer.step"] == 6
    assert v["optimizer.nonfinite"] is False and v["optimizer.exp_avg_sq_max"] > 0
    assert 0 <= v["optimizer.eps_dominated_fraction"] < 0.5
    assert "optimizer.step_mismatch" not in v
    top = found(obs, "optimizer.exp_avg_sq")[0].value
    assert all(name.startswith(("transformer.", "lm_head")) for name in top["by_param"])  # names, not indices
    assert set(top["by_layer"]) <= {"0", "1", "2", "3"} and top["by_layer"]
    # warmup_steps=3: the logged LR peaks at step 4; step 6 is within 3x of it
    assert v["optimizer.warmup_steps"] == 4 and v["optimizer.near_warmup_end"] is True
    assert found(obs, "optimizer.near_warmup_end")[0].where == "trainer_state.json"


def test_nan_in_optimizer_state(fresh):
    folder = fresh("trainer-output") / "checkpoint-6"
    state = torch.load(folder / "optimizer.pt", weights_only=True)
    state["state"][3]["exp_avg_sq"].view(-1)[:2] = float("nan")
    torch.save(state, folder / "optimizer.pt")
    obs = probe(folder)
    bad = found(obs, "optimizer.nonfinite")
    assert [(f.severity, f.where, f.value) for f in bad] == [("error", "optimizer.pt:state.3", {"nan": 2, "inf": 0})]
    assert "(transformer." in bad[0].message  # the parameter's name
    assert values(obs)["optimizer.nonfinite"] is True


def test_nan_in_zero_shard(tmp_path):
    obs = probe(F.megatron_deepspeed(tmp_path / "ds", nan_in_optimizer=True))
    bad = found(obs, "optimizer.nonfinite")
    assert bad[0].where == ("global_step200/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt:"
                            "optimizer_state_dict.base_optimizer_state.state.0")
    assert values(obs)["optimizer.nonfinite"] is True


def test_megatron_lm_state(art):
    obs = probe(art("megatron-lm"))
    v = values(obs)
    assert v["optimizer.beta2"] == 0.95 and v["optimizer.step"] == 300
    assert v["optimizer.loss_scale"] == 0.5 and found(obs, "optimizer.loss_scale")[0].severity == "warning"
    assert v["optimizer.warmup_steps"] == 250 and v["optimizer.near_warmup_end"] is True


def test_far_from_warmup(tmp_path):
    obs = probe(F.megatron_deepspeed(tmp_path / "ds", iterations=(5000,), latest=5000))
    assert values(obs)["optimizer.near_warmup_end"] is False and not found(obs, "optimizer.near_warmup_end")


def test_scheduler_reset_on_resume(fresh):
    folder = fresh("trainer-output") / "checkpoint-6"
    sched = torch.load(folder / "scheduler.pt", weights_only=True)
    sched["last_epoch"] = 0
    torch.save(sched, folder / "scheduler.pt")
    obs = probe(folder)
    assert found(obs, "optimizer.step_mismatch")[0].value == [6, 0]
    assert values(obs)["optimizer.step_mismatch"] is True


def test_still_in_warmup(fresh):
    """The LR logged so far is still rising: a run with warmup_steps=40 stopped at step 6."""
    folder = fresh("trainer-output") / "checkpoint-6"
    state = json.loads((folder / "trainer_state.json").read_text())
    for entry in state["log_history"]:
        if "learning_rate" in entry:
            entry["learning_rate"] = 1e-3 * (entry["step"] - 1) / 40
    F.edit_json(folder / "trainer_state.json", log_history=state["log_history"])
    obs = probe(folder)
    f = found(obs, "optimizer.in_warmup")[0]
    assert f.value == pytest.approx(41, abs=1)  # linear extrapolation to base_lr 1e-3, in logged steps
    assert values(obs)["optimizer.near_warmup_end"] is False


def test_eps_dominated(tmp_path):
    p = torch.nn.Linear(64, 64)
    opt = torch.optim.AdamW(p.parameters(), eps=1e-3)
    (p(torch.randn(4, 64)).sum() * 1e-6).backward()  # gradients far below eps
    opt.step()
    torch.save(opt.state_dict(), tmp_path / "optimizer.pt")
    obs = probe(tmp_path / "optimizer.pt")
    assert values(obs)["optimizer.eps_dominated_fraction"] > 0.5 and found(obs, "optimizer.eps_dominated")
    assert values(obs)["optimizer.step"] == 1


@pytest.mark.parametrize("name", ["trainer-output", "megatron-deepspeed"])
def test_healthy_has_no_error(art, name):
    assert not [f for f in probe(art(name)).findings if f.severity == "error"]
