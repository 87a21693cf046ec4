"""Detectors on logs with known events: each found at the right iteration (± one logging interval),
healthy logs without error findings, and the facts the rules use (rollback, skip range, ...)."""
from __future__ import annotations

import random

import pytest

import logfactory as LF
from troubleshoot.loaders import detect
from troubleshoot.observations import Artifact
from troubleshoot.probes import ProbeContext
from troubleshoot.probes import logs as P
from troubleshoot.probes.logs import detectors as D
from troubleshoot.probes.logs.stats import MAX_BLOCKS
from troubleshoot.probes.logs.summary import analyse
from troubleshoot.report.plot import write_plots
from troubleshoot.report.timeline import timeline_lines

WRITERS = {
    "megatron": lambda p, rows: LF.write_megatron(p / "train.log", rows, save_every=1000),
    "trainer_state": lambda p, rows: LF.write_trainer_state(p / "trainer_state.json", rows, save_steps=1000),
    "jsonl": lambda p, rows: LF.write_jsonl(p / "metrics.jsonl", rows),
    "csv": lambda p, rows: LF.write_csv(p / "metrics.csv", rows),
    "nanogpt": lambda p, rows: LF.write_nanogpt(p / "out.txt", rows),
    "modded": lambda p, rows: LF.write_modded(p / "log.txt", rows),
    "hf_stdout": lambda p, rows: LF.write_hf_stdout(p / "stdout.txt", rows),
}
# HF's printed dicts carry no step: iterations are record numbers there
SCALE = {"hf_stdout": 10}


def run_probe(*paths, artifacts=(), **kw):
    return P.run(ProbeContext([detect(p) for p in paths] + list(artifacts), **kw))


def facts(obs):
    return {k: v.value for k, v in obs.facts.items()}


def errors(obs):
    return [f for f in obs.findings if f.severity == "error"]


def near(value, target, tol):
    return value is not None and abs(value - target) <= tol


# --------------------------------------------------------------------------------------------
# the detector itself

def test_spike_detector_on_a_noisy_series():
    rnd = random.Random(0)
    det = D.SpikeDetector("spike")
    for i in range(1, 400):
        v = 3.0 * (1 + rnd.gauss(0, 0.01)) * (2.0 if 200 <= i < 230 else 1.0)
        det.update(i, v, i)
    det.finish()
    (ev,) = det.events
    assert (ev.kind, ev.start, ev.onset, ev.recovered, ev.end) == ("spike", 200, 200, True, 230)
    assert 1.9 < ev.ratio < 2.2


def test_steady_rise_is_divergence_not_spike():
    """A rise of ~3 % per record opens an event after a few records; slower ones are left to the
    block-level drift check (test_slow_divergence_without_a_spike)."""
    det = D.SpikeDetector("spike")
    for i in range(1, 200):
        det.update(i, 3.0 if i < 100 else 3.0 + 0.1 * (i - 100), i)
    det.finish()
    assert [e.kind for e in det.events] == ["divergence"]
    assert near(det.events[0].onset, 100, 3) and not det.events[0].recovered


def test_event_that_never_recovers_settles():
    det = D.SpikeDetector("spike")
    for i in range(1, 400):
        det.update(i, 3.0 if i < 100 else 4.0, i)
    det.finish()
    ev = det.events[0]
    assert not ev.recovered and ev.settled == pytest.approx(4.0) and ev.records >= D.SETTLE_RECORDS


# --------------------------------------------------------------------------------------------
# seed 002 (tr8-104B chronicles), the excerpts verbatim

SEED_TRY1 = """\
 iteration     7000/  159576 | consumed samples:       260912 | elapsed time per iteration (ms): 18706.1 | learning rate: 6.000E-05 | global batch size:    96 | lm loss: 6.444662E+00 | loss scale: 2048.0 | grad norm: 98258.265 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
------------------------------------------------------------------------------------------------
 validation loss at iteration 7000 | lm loss value: 7.174200E+00 | lm loss PPL: 1.305315E+03 |
------------------------------------------------------------------------------------------------
 iteration     7010/  159576 | consumed samples:       261872 | elapsed time per iteration (ms): 19904.0 | learning rate: 6.000E-05 | global batch size:    96 | lm loss: 1.142026E+01 | loss scale: 2048.0 | grad norm: 219645.978 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 [...]
 iteration     7220/  159576 | consumed samples:       282032 | elapsed time per iteration (ms): 18333.4 | learning rate: 6.000E-05 | global batch size:    96 | lm loss: 7.155109E+00 | loss scale: 2048.0 | grad norm: 16921.991 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
"""
SEED_TRY2 = """\
 iteration     6900/  159576 | consumed samples:       251312 | elapsed time per iteration (ms): 18495.6 | learning rate: 6.000E-05 | global batch size:    96 | lm loss: 6.365808E+00 | loss scale: 4096.0 | grad norm: 95313.572 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 iteration     6910/  159576 | consumed samples:       252272 | elapsed time per iteration (ms): 18802.1 | learning rate: 6.000E-05 | global batch size:    96 | lm loss: 6.598378E+00 | loss scale: 4096.0 | grad norm: 84678.880 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 iteration     6920/  159576 | consumed samples:       253232 | elapsed time per iteration (ms): 18641.0 | learning rate: 6.000E-05 | global batch size:    96 | lm loss: 7.314456E+00 | loss scale: 4096.0 | grad norm: 122716.232 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 iteration     6930/  159576 | consumed samples:       254192 | elapsed time per iteration (ms): 18564.1 | learning rate: 6.000E-05 | global batch size:    96 | lm loss: 9.121927E+00 | loss scale: 4096.0 | grad norm: 283384.130 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 iteration     6940/  159576 | consumed samples:       255152 | elapsed time per iteration (ms): 18549.7 | learning rate: 6.000E-05 | global batch size:    96 | lm loss: 1.023865E+01 | loss scale: 4096.0 | grad norm: 42359.376 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
"""


def test_seed_try1_glitch_and_rollback_to_the_folder_given(tmp_path):
    log = tmp_path / "tr8-104B.log"
    log.write_text(SEED_TRY1)
    ckpt = tmp_path / "checkpoints"
    for step in (5700, 6000, 6210, 7200):
        (ckpt / f"global_step{step}").mkdir(parents=True)
    (ckpt / "latest").write_text("global_step7200")
    obs = run_probe(log, artifacts=[Artifact(str(ckpt), "megatron-checkpoint")])
    spike = next(f for f in obs.findings if f.id == "logs.spike")
    assert spike.severity == "error" and spike.value["start"] == 7010 and spike.value["peak"] == 11.42026
    assert "not recovered" in spike.message
    f = facts(obs)
    assert f["logs.spike_iteration"] == 7010 and f["logs.spike_recovered"] is False
    assert f["logs.rollback_iteration"] == 6210  # what the BLOOM team rolled back to
    assert f["logs.skip_range"] == "7001-7200" and f["logs.grad_norm_explosion"] is True


def test_seed_try2_rise(tmp_path):
    log = tmp_path / "try2.log"
    log.write_text(SEED_TRY2)
    f = facts(run_probe(log))
    assert f["logs.spike"] is True and f["logs.spike_iteration"] == 6910  # 6.37 -> 6.60 -> 7.31 -> 9.12 -> 10.2
    assert f["logs.instability_onset"] == 6910 and f["logs.skip_range"] == "6901-7100"


def test_trainer_state_inside_a_checkpoint_folder(tmp_path):
    """`llmfix probe run/checkpoint-3000`: the log is found inside, the rollback among the siblings."""
    rows = LF.simulate(LF.Run(iters=3000, interval=10, fp16=False, seed=19, warmup=300,
                              spikes=[LF.Spike(2200, 2.5, recover=None, gn_lead=None)]))
    for step in (1000, 2000, 3000):
        (tmp_path / f"checkpoint-{step}").mkdir()
    LF.write_trainer_state(tmp_path / "checkpoint-3000" / "trainer_state.json", rows, save_steps=1000)
    obs = P.run(ProbeContext([Artifact(str(tmp_path / "checkpoint-3000"), "hf-checkpoint")]))
    f = facts(obs)
    assert near(f["logs.spike_iteration"], 2200, 10) and f["logs.rollback_iteration"] == 2000
    assert "checkpoint folders given alongside" in next(x.message for x in obs.findings if x.id == "logs.rollback")


def test_seed_try1_then_resume_and_try2_in_one_log(tmp_path):
    """The chronicle's story in one file: glitch, resume from global_step6210, glitch again."""
    log = tmp_path / "main_log.txt"
    log.write_text(SEED_TRY1 + " loading checkpoint from /gpfsscratch/checkpoints at iteration 6210\n"
                   + " successfully loaded checkpoint from /gpfsscratch/checkpoints at iteration 6210\n" + SEED_TRY2)
    obs = run_probe(log)
    f = facts(obs)
    assert f["logs.instability_onset"] == 6910 and f["logs.rollback_iteration"] == 6210
    assert [x.value["start"] for x in obs.findings if x.id == "logs.spike"] == [7010, 6920]
    assert any(x.id == "logs.restart" for x in obs.findings)


# --------------------------------------------------------------------------------------------
# long synthetic runs in every format

@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_healthy_runs_give_no_error(tmp_path, fmt):
    run = LF.Run(iters=20000, interval=10, fp16=fmt == "megatron", seed=11,
                 noise=0.03 if fmt in ("nanogpt", "modded") else 0.01)
    obs = run_probe(WRITERS[fmt](tmp_path, LF.simulate(run)))
    assert not errors(obs), [f.message for f in errors(obs)]
    assert not [f for f in obs.findings if f.id in ("logs.spike", "logs.divergence", "logs.nan")]
    assert facts(obs)["logs.nan"] is False


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_injected_spike_found_at_its_iteration(tmp_path, fmt):
    run = LF.Run(iters=12000, interval=10, fp16=False, seed=3, spikes=[LF.Spike(7000, 2.5, recover=None, gn_lead=None)])
    obs = run_probe(WRITERS[fmt](tmp_path, LF.simulate(run)))
    f = facts(obs)
    k = SCALE.get(fmt, 1)
    assert near(f["logs.spike_iteration"] * k, 7000, 10), f
    assert f["logs.spike_recovered"] is False and any(x.id == "logs.spike" for x in errors(obs))


@pytest.mark.parametrize("fmt", ["megatron", "nanogpt", "trainer_state"])
def test_injected_nan_found_at_its_iteration(tmp_path, fmt):
    run = LF.Run(iters=6000, interval=10, fp16=False, seed=4, nan_at=4000)
    obs = run_probe(WRITERS[fmt](tmp_path, LF.simulate(run)))
    f = facts(obs)
    assert f["logs.nan"] is True and f["logs.nan_iteration"] == 4000 and f["logs.nan_early"] is False
    assert f["logs.rollback_iteration"] <= 3990
    assert any(x.id == "logs.nan" for x in errors(obs))


def test_recovered_spike_is_a_warning(tmp_path):
    run = LF.Run(iters=12000, interval=10, fp16=False, seed=5, spikes=[LF.Spike(5000, 2.0, recover=300, gn_lead=None)])
    obs = run_probe(WRITERS["megatron"](tmp_path, LF.simulate(run)))
    spike = next(f for f in obs.findings if f.id == "logs.spike")
    assert spike.severity == "warning" and near(spike.value["onset"], 5000, 10)
    assert not errors(obs)
    f = facts(obs)
    assert f["logs.spike_recovered"] is True and 100 <= f["logs.recovery_iterations"] <= 320


def test_slow_divergence_without_a_spike(tmp_path):
    run = LF.Run(iters=15000, interval=10, fp16=False, seed=6, diverge_at=6000, diverge_rate=4.0)
    obs = run_probe(WRITERS["jsonl"](tmp_path, LF.simulate(run)))
    f = facts(obs)
    assert f["logs.divergence"] is True and f["logs.spike"] is False
    assert near(f["logs.instability_onset"], 6000, 200)
    assert any(x.id == "logs.divergence" for x in errors(obs)) and "logs.plateau" not in [x.id for x in obs.findings]


def test_grad_norm_leads_the_spike(tmp_path):
    run = LF.Run(iters=12000, interval=10, fp16=False, seed=7, spikes=[LF.Spike(8000, 2.0, recover=None, gn_lead=30)])
    obs = run_probe(WRITERS["megatron"](tmp_path, LF.simulate(run)))
    f = facts(obs)
    assert f["logs.grad_norm_explosion"] is True and near(f["logs.grad_norm_lead"], 30, 10)
    assert near(f["logs.instability_onset"], 7970, 10) and f["logs.rollback_iteration"] == 7000
    gn = next(x for x in obs.findings if x.id == "logs.grad_norm_explosion")
    assert "before the loss left its level" in gn.message


def test_early_warning_loss_scale_sets_the_rollback(tmp_path):
    """BLOOM-104B: the loss scale turned at ~4.7k, the spike came at ~7k; roll back before 4.7k."""
    run = LF.Run(iters=10000, interval=10, seed=8, spikes=[LF.Spike(7000, 2.0, recover=None, gn_lead=None)],
                 ls_decline=(4700, 6600))
    path = LF.write_megatron(tmp_path / "train.log", LF.simulate(run), save_every=300)
    obs = run_probe(path)
    f = facts(obs)
    assert f["logs.early_warning"] is True and near(f["logs.instability_onset"], 4700, 10)
    assert f["logs.rollback_iteration"] == 4500 and f["logs.checkpoint_interval"] == 300
    assert near(f["logs.spike_iteration"], 7000, 10) and f["logs.loss_scale_collapse"] is True
    assert any(x.id == "logs.early_warning" for x in obs.findings)


def test_early_warning_grad_norm_trend(tmp_path):
    """No fp16 here: the grad-norm level triples from 4000 on, the loss spikes at 7000."""
    run = LF.Run(iters=10000, interval=10, fp16=False, seed=17, gn_trend=(4000, 7000, 3.0),
                 spikes=[LF.Spike(7000, 2.0, recover=None, gn_lead=None)])
    obs = run_probe(LF.write_megatron(tmp_path / "train.log", LF.simulate(run), save_every=500))
    f = facts(obs)
    assert f["logs.early_warning"] is True and 4000 <= f["logs.instability_onset"] <= 5500
    assert f["logs.rollback_iteration"] < f["logs.instability_onset"]
    assert "grad-norm level" in next(x.message for x in obs.findings if x.id == "logs.early_warning")


def test_loss_scale_pinned_at_one_is_an_error(tmp_path):
    run = LF.Run(iters=6000, interval=10, seed=9, ls_decline=(2000, 6000))
    obs = run_probe(LF.write_megatron(tmp_path / "train.log", LF.simulate(run)))
    ls = next(x for x in obs.findings if x.id == "logs.loss_scale_collapse")
    assert ls.severity == "error" and "pinned at the minimum" in ls.message
    assert facts(obs)["logs.loss_scale_min"] == 1.0


def test_bf16_megatron_prints_loss_scale_one(tmp_path):
    """Megatron-LM in bf16 logs 'loss scale: 1.0' on every line: that is no collapse."""
    rows = LF.simulate(LF.Run(iters=3000, interval=10, fp16=False, seed=18))
    lines = [LF.megatron_line(r["it"], 3000, r["loss"], r["lr"], 1.0, r["gn"]) for r in rows]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    obs = run_probe(p)
    assert not [x for x in obs.findings if x.severity != "info"]
    assert "logs.loss_scale_collapse" not in facts(obs)
    assert not any("lscale" in line for line in timeline_lines(obs.attachments))


def test_warmup_end_and_spike_after_it(tmp_path):
    run = LF.Run(iters=12000, interval=10, fp16=False, warmup=3000, seed=10,
                 spikes=[LF.Spike(3600, 2.0, recover=None, gn_lead=None)])
    f = facts(run_probe(WRITERS["megatron"](tmp_path, LF.simulate(run))))
    assert f["logs.warmup_end_iteration"] == 3000 and f["logs.spike_after_warmup"] is True
    assert f["logs.lr_peak"] == pytest.approx(6e-5)
    run.spikes = [LF.Spike(11000, 2.0, recover=None, gn_lead=None)]
    run.warmup = 1000
    f = facts(run_probe(WRITERS["trainer_state"](tmp_path, LF.simulate(run))))
    assert f["logs.warmup_end_iteration"] == 1000 and f["logs.spike_after_warmup"] is False


def test_plateau(tmp_path):
    run = LF.Run(iters=20000, interval=10, fp16=False, seed=12, plateau_at=2000, noise=0.003)
    obs = run_probe(WRITERS["jsonl"](tmp_path, LF.simulate(run)))
    p = next(x for x in obs.findings if x.id == "logs.plateau")
    assert near(p.value["since"], 2000, 600) and facts(obs)["logs.plateau"] is True


def test_eval_loss_rising_while_train_falls(tmp_path):
    rows = LF.simulate(LF.Run(iters=10000, interval=10, fp16=False, seed=13, val_every=500))
    for r in rows:
        if r["val"] is not None and r["it"] > 4000:
            r["val"] = 4.0 + (r["it"] - 4000) / 2000
    obs = run_probe(WRITERS["trainer_state"](tmp_path, rows))
    assert facts(obs)["logs.eval_loss_rising"] is True
    assert "training loss keeps falling" in next(x.message for x in obs.findings if x.id == "logs.eval_loss_rising")


def test_restarted_log_and_duplicate_rank_lines(tmp_path):
    rows = LF.simulate(LF.Run(iters=3000, interval=10, fp16=False, seed=14))
    lines = [LF.megatron_line(r["it"], 3000, r["loss"], r["lr"], None, r["gn"]) for r in rows]
    text = "\n".join(lines[:200] + [" loaded checkpoint from /ck at iteration 1500"] + lines[150:] + lines[-1:])
    p = tmp_path / "train.log"
    p.write_text(text + "\n")
    obs = run_probe(p)
    assert [x for x in obs.findings if x.id == "logs.restart"] and not errors(obs)


def test_oom_during_eval_and_system_errors(tmp_path):
    rows = LF.simulate(LF.Run(iters=500, interval=10, fp16=False))
    lines = [LF.megatron_line(r["it"], 500, r["loss"], r["lr"], None, r["gn"]) for r in rows]
    lines += LF.validation_lines(500, 5.0)[:1] + ["***** Running Evaluation *****",
                                                  "torch.cuda.OutOfMemoryError: CUDA out of memory.",
                                                  "[E ProcessGroupNCCL.cpp:475] Watchdog caught collective operation timeout"]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    obs = run_probe(p)
    f = facts(obs)
    assert f["logs.oom_phase"] == "eval" and f["logs.system_error"] == "nccl-timeout"


def test_timeline_and_plot(tmp_path, monkeypatch):
    run = LF.Run(iters=8000, interval=10, seed=15, spikes=[LF.Spike(5000, 2.0, recover=None)])
    path = LF.write_megatron(tmp_path / "train.log", LF.simulate(run), save_every=1000)
    out = tmp_path / "out.png"
    obs = run_probe(path)
    assert [f.id for f in write_plots(obs.attachments, str(out))] == ["logs.plot"]
    assert out.stat().st_size > 10_000
    lines = timeline_lines(obs.attachments)
    text = "\n".join(lines)
    assert "loss" in text and "^" in text and "R rollback" in text
    assert all(len(line) < 140 for line in lines)
    import builtins
    real_import = builtins.__import__

    def no_matplotlib(name, *a, **kw):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *a, **kw)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    found = write_plots(obs.attachments, str(tmp_path / "x.png"))
    assert not (tmp_path / "x.png").exists()
    assert [x.id for x in found] == ["logs.plot_missing"] and "pip install" in found[0].message


def test_memory_stays_bounded_on_a_long_run(tmp_path):
    rows = LF.simulate(LF.Run(iters=60000, interval=1, fp16=False, save_every=None, val_every=None, seed=16))
    path = LF.write_jsonl(tmp_path / "m.jsonl", rows)
    s = analyse(path)
    assert s.records == 60000 and len(s.blocks.it) <= MAX_BLOCKS
    assert len(s.loss.recent) <= D.LEVEL_WINDOW and len(s.loss.hist) <= D.LOOKBACK
