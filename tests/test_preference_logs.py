"""Preference / RL trainer logs and logs whose loss is exactly 0, end to end through `llmfix probe`.

Each log is written the way TRL's trainers log (trainer_state.json ``log_history`` entries, or the
dicts the Trainer prints) with a known failure; the right cause must rank first, and healthy runs
of the same kind must stay quiet.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import logfactory as L
import pytest
from click.testing import CliRunner

from troubleshoot import cli
from troubleshoot.probes.logs.summary import analyse


def probe(*paths: Path) -> tuple[int, dict]:
    result = CliRunner().invoke(cli.main, ["probe", "--json", "--static", *map(str, paths)])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def findings(data: dict) -> set[str]:
    return {f["id"] for f in data["findings"]}


def facts_of(path: Path) -> dict:
    from troubleshoot.observations import Artifact
    from troubleshoot.probes import ProbeContext, logs

    obs = logs.run(ProbeContext([Artifact(str(path), "log", "")]))
    return {k: f.value for k, f in obs.facts.items()}


def dpo_state(path: Path, steps: int = 60, *, chosen=lambda t: 0.3 * t, rejected=lambda t: -2.5 * t,
              loss=lambda t: 0.693 - 0.25 * t, accuracy=lambda t: 0.5 + 0.25 * t, logps_chosen=lambda t: -310.0,
              lr: float = 5e-7, eval_every: int = 20) -> Path:
    """A TRL DPOTrainer trainer_state.json: one log_history entry per logging step (t runs 0..1)."""
    hist = []
    for i in range(1, steps + 1):
        t = i / steps
        c, r = chosen(t), rejected(t)
        hist.append({"epoch": round(t, 4), "grad_norm": 4.0, "learning_rate": lr, "logits/chosen": -2.1,
                     "logits/rejected": -2.0, "logps/chosen": logps_chosen(t), "logps/rejected": -330.0 + 40 * r,
                     "loss": loss(t), "rewards/accuracies": accuracy(t), "rewards/chosen": c,
                     "rewards/margins": c - r, "rewards/rejected": r, "step": i * 10})
        if i % eval_every == 0:  # evaluation entries carry eval_ keys and must not count as training
            hist.append({"epoch": round(t, 4), "eval_loss": 0.6, "eval_rewards/chosen": 5.0,
                         "eval_rewards/rejected": 9.0, "eval_runtime": 3.2, "step": i * 10})
    hist.append({"epoch": 1.0, "step": steps * 10, "train_loss": 0.4, "train_runtime": 100.0, "total_flos": 1e12})
    path.write_text(json.dumps({"global_step": steps * 10, "log_history": hist, "logging_steps": 10,
                                "save_steps": 500, "max_steps": steps * 10}))
    return path


def rl_stdout(path: Path, steps: int = 60, *, kl=lambda t: 0.02 + 0.05 * t, clip=lambda t: 0.05,
              length=lambda t: 180.0, key: str = "objective/kl") -> Path:
    """What an RL trainer prints per logging step (PPO / RLOO: objective/kl; GRPO: kl)."""
    with open(path, "w") as f:
        for i in range(1, steps + 1):
            t = i / steps
            d = {"loss": 0.01 * math.sin(i), "grad_norm": 0.8, "learning_rate": 1e-6, key: kl(t),
                 "policy/clipfrac_avg": clip(t), "completions/mean_length": length(t), "reward": 0.1 + t,
                 "epoch": round(t, 3)}
            f.write(repr(d) + "\n")
    return path


# ---------------------------------------------------------------------------------------------
# preference runs

def test_both_rewards_falling_is_likelihood_displacement(tmp_path):
    path = dpo_state(tmp_path / "trainer_state.json", chosen=lambda t: -6 * t, rejected=lambda t: -14 * t,
                     logps_chosen=lambda t: -310.0 - 60 * t, loss=lambda t: 0.693 - 0.4 * t,
                     accuracy=lambda t: 0.5 + 0.4 * t)
    _code, data = probe(path)
    assert {"logs.pref.rewards_falling", "logs.pref.chosen_logps_falling"} <= findings(data)
    assert data["causes"][0]["id"] == "preference-divergence.likelihood-displacement"
    assert data["symptoms"][0]["id"] == "preference-divergence"


def test_runaway_margins_and_collapsed_loss_point_at_the_learning_rate(tmp_path):
    path = dpo_state(tmp_path / "trainer_state.json", chosen=lambda t: 1.0 + 2 * t, rejected=lambda t: -40 * t,
                     loss=lambda t: max(0.693 * (1 - t) ** 4, 1e-4), accuracy=lambda t: min(1.0, 0.6 + 2 * t))
    facts = facts_of(path)
    assert facts["logs.pref.margin_runaway"] and facts["logs.pref.loss_collapsed"]
    assert not facts["logs.pref.rewards_both_falling"]
    _code, data = probe(path)
    assert data["causes"][0]["id"] == "preference-divergence.lr-too-high"


def test_rewards_far_from_zero_at_step_one_mean_another_reference(tmp_path):
    path = dpo_state(tmp_path / "trainer_state.json", chosen=lambda t: -3.0 + 0.2 * t, rejected=lambda t: -3.5 - t)
    assert facts_of(path)["logs.pref.initial_rewards_nonzero"] is True
    _code, data = probe(path)
    assert "logs.pref.initial_rewards" in findings(data)
    assert data["causes"][0]["id"] == "preference-divergence.reference-mismatch"


def test_loss_stuck_at_ln2(tmp_path):
    path = dpo_state(tmp_path / "trainer_state.json", chosen=lambda t: 0.0, rejected=lambda t: -0.001 * t,
                     loss=lambda t: 0.6931, accuracy=lambda t: 0.5)
    facts = facts_of(path)
    assert facts["logs.pref.loss_stuck"] is True and facts["logs.pref.accuracy_final"] == 0.5


def test_negative_kl_is_a_sampling_mismatch(tmp_path):
    path = rl_stdout(tmp_path / "ppo.log", kl=lambda t: 0.05 - 3.0 * t, clip=lambda t: 0.1 + 0.3 * t)
    code, data = probe(path)
    assert "logs.pref.kl_negative" in findings(data) and code == 1
    assert data["causes"][0]["id"] == "preference-divergence.kl-instability"


def test_grpo_kl_key_and_growing_length(tmp_path):
    path = rl_stdout(tmp_path / "grpo.log", key="kl", kl=lambda t: 0.001 + 40 * t ** 3, length=lambda t: 150 + 600 * t)
    facts = facts_of(path)
    assert facts["logs.pref.kl_exploding"] and facts["logs.pref.length_growing"]
    assert not facts["logs.pref.kl_negative"]


@pytest.mark.parametrize("writer", ["dpo", "rl"])
def test_healthy_preference_runs_stay_quiet(tmp_path, writer):
    path = dpo_state(tmp_path / "trainer_state.json") if writer == "dpo" else rl_stdout(tmp_path / "ppo.log")
    code, data = probe(path)
    assert not {f for f in findings(data) if f.startswith("logs.pref.")}
    assert not any(c["id"].startswith("preference-divergence.") and c["status"] in ("likely", "confirmed")
                   for c in data["causes"])
    assert code == 0


def test_pref_series_stay_bounded_on_long_logs(tmp_path):
    path = dpo_state(tmp_path / "trainer_state.json", steps=5000, eval_every=10**9,
                     chosen=lambda t: -6 * t, rejected=lambda t: -14 * t)
    s = analyse(path)
    series = s.pref.series["chosen"]
    assert series.count == 5000 and len(series.points()) <= 2 * series.CAP
    assert s.pref.series["chosen"].edges()[1] == pytest.approx(-6 * 0.95, abs=0.2)


# ---------------------------------------------------------------------------------------------
# loss exactly 0

def _zero_rows(n: int = 30) -> list[dict]:
    return [{"it": 10 * (i + 1), "loss": 0.0, "gn": float("nan"), "lr": 2e-5, "val": None} for i in range(n)]


@pytest.mark.parametrize("fmt", ["hf-stdout", "trainer-state", "jsonl", "csv", "megatron"])
def test_zero_loss_with_nan_grad_norm_in_every_format(tmp_path, fmt):
    rows = _zero_rows()
    path = {"hf-stdout": lambda: L.write_hf_stdout(tmp_path / "train.log", rows),
            "trainer-state": lambda: L.write_trainer_state(tmp_path / "trainer_state.json", rows),
            "jsonl": lambda: L.write_jsonl(tmp_path / "metrics.jsonl", rows),
            "csv": lambda: L.write_csv(tmp_path / "metrics.csv", rows),
            "megatron": lambda: L.write_megatron(tmp_path / "megatron.log", [
                {**r, "ls": None, "skipped": 0, "nan": 0} for r in rows], noise_lines=False)}[fmt]()
    facts = facts_of(path)
    assert facts["logs.loss_zero"] and facts["logs.loss_zero_grad_nan"] and facts["logs.loss_zero_from_start"]
    code, data = probe(path)
    assert "logs.zero_loss" in findings(data) and code == 1
    assert data["causes"][0]["id"] == "zero-loss.nan-hidden-by-logger"


def test_zero_loss_with_finite_grad_norm_is_not_a_hidden_nan(tmp_path):
    rows = [{**r, "gn": 0.7} for r in _zero_rows()]
    facts = facts_of(L.write_hf_stdout(tmp_path / "train.log", rows))
    assert facts["logs.loss_zero"] and not facts["logs.loss_zero_grad_nan"]


def test_small_but_nonzero_loss_is_not_zero_loss(tmp_path):
    rows = [{"it": 10 * (i + 1), "loss": 0.0123 / (i + 1), "gn": 0.5, "lr": 2e-5, "val": None} for i in range(30)]
    facts = facts_of(L.write_hf_stdout(tmp_path / "train.log", rows))
    assert facts["logs.loss_zero"] is False and facts["logs.loss_zero_from_start"] is False
