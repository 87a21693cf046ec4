"""The 17 real logs of /work/shared/real-logs: each parses and reads the way its run went.

What happened in each run (read from the logs and the chronicles they were quoted from):

01  BLOOM tr8-104B try 1: lm loss 6.44 -> 11.42 between 7000 and 7010, grad norm 98k -> 220k; still
    7.16 at 7220 (the team rolled back to 6210)                         -> unrecovered spike
02  try 2: 6.37 -> 6.60 -> 7.31 -> 9.12 -> 10.24 over 6900-6940          -> unrecovered spike from 6910
03  104B exp 11: grad norm 13k -> 263k at 11447, loss 3.1 -> 7.7 at 11448 -> grad norm leads by 1
04  104B exp 12: grad norm 1.5M at 8740, loss 7.3 at 8741, still 7.0 at 9026 after a gap; loss scale
    65536 -> 8192                                                         -> unrecovered spike
05  tr1-13B: loss 2.77 -> 7.34 -> 8.72 at 29050-29060 with the loss scale 65536 -> 4096, grad norm
    not measured (0.000)                                                  -> spike + loss-scale warning
06  tr8b-104B BNB exp 6: LR reaches 6e-5 at 6503, then excerpts after gaps, loss falling -> healthy
07  tr8b-104B embed-norm exp 7: six DeepSpeed OVERFLOW lines, scale 1048576 -> 32768, loss 2.67 -> 4.4,
    skipped steps repeat the grad norm                                    -> spike + loss-scale collapse
08  tr11-176B first spike: grad norm 0.24 -> 960 from 31215, loss 5.10 at 31219, back to 2.22 at 31250
                                                                          -> recovered spike (warning)
09, 10  gpt2 test runs: fp16 start-up skips, a warmup spike at 30 that recovers, job cancelled at 200
11  gpt2 3D perf run: warmup spike at 3-28, then the loss climbs 11.6 -> 20.4 from ~32 to the end:
    NOT healthy (the run is a throughput test; its loss diverges)        -> divergence error
12  Megatron-DeepSpeed llama: loss scale down to 1 with 1586 of 2500 steps skipped, loss 10.65 -> 12.55
13  nanoGPT LoRA: loss 4.82 -> 270 at 110, not back by 180                -> unrecovered spike
14  nanoGPT LoRA: loss NaN from 110                                       -> NaN
15  modded-nanogpt 1B record run, 20344 steps                             -> healthy (one-step blips)
16  HF trainer_state with `lr` instead of `learning_rate`, 40000 steps    -> healthy
17  HF trainer_state, 9-epoch fine-tune, warmup of 6 steps                -> healthy
"""
from __future__ import annotations

from pathlib import Path

import pytest

from troubleshoot.loaders import detect
from troubleshoot.probes import ProbeContext
from troubleshoot.probes import logs as P
from troubleshoot.report.timeline import timeline_lines

REAL = Path(__file__).resolve().parents[1].parent / "shared" / "real-logs"
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason=f"{REAL} not present")

# file prefix -> detail, records (lo, hi), first and last iteration
SHAPE = {
    "01": ("megatron text log", (3, 3), 7000, 7220),
    "02": ("megatron text log", (5, 5), 6900, 6940),
    "03": ("megatron text log", (3, 3), 11446, 11448),
    "04": ("megatron text log", (8, 8), 8738, 9027),
    "05": ("megatron text log", (8, 8), 29020, 29090),
    "06": ("megatron text log", (6, 6), 6502, 12001),
    "07": ("megatron text log", (9, 9), 17060, 17068),
    "08": ("megatron text log", (11, 11), 31214, 31251),
    "09": ("megatron text log", (20, 20), 10, 200),
    "10": ("megatron text log", (20, 20), 10, 200),
    "11": ("megatron text log", (62, 62), 1, 62),
    "12": ("megatron text log", (6, 6), 1, 2500),
    "13": ("nanogpt text log", (19, 19), 0, 180),
    "14": ("nanogpt text log", (19, 19), 0, 180),
    "15": ("nanogpt text log", (20000, 20400), 1, 20344),
    "16": ("hf trainer_state.json", (2000, 2000), 20, 40000),
    "17": ("hf trainer_state.json", (6687, 6687), 1, 6687),
}
HEALTHY = ("06", "08", "09", "10", "15", "16", "17")  # no error finding (08-10: recovered spikes only)


def path_of(prefix: str) -> Path:
    (p,) = REAL.glob(f"{prefix}_*")
    return p


_cache: dict[str, object] = {}


def probe(prefix: str):
    if prefix not in _cache:
        _cache[prefix] = P.run(ProbeContext([detect(path_of(prefix))]))
    return _cache[prefix]


def facts(prefix: str) -> dict:
    return {k: v.value for k, v in probe(prefix).facts.items()}


def finding(prefix: str, fid: str, severity: str | None = None):
    hits = [f for f in probe(prefix).findings if f.id == fid and (severity is None or f.severity == severity)]
    assert hits, (prefix, fid, [(f.id, f.severity) for f in probe(prefix).findings])
    return hits[0]


def errors(prefix: str) -> list:
    return [f for f in probe(prefix).findings if f.severity == "error"]


@pytest.mark.parametrize("prefix", sorted(SHAPE))
def test_format_records_and_iterations(prefix):
    detail, (lo, hi), first, last = SHAPE[prefix]
    assert detect(path_of(prefix)).detail == detail
    summary = finding(prefix, "logs.summary").value
    assert lo <= summary["records"] <= hi and (summary["first"], summary["last"]) == (first, last)
    assert timeline_lines(probe(prefix).attachments)


@pytest.mark.parametrize("prefix", HEALTHY)
def test_healthy_runs_have_no_error(prefix):
    assert not errors(prefix), [f.message for f in errors(prefix)]


def test_01_bloom_104b_glitch():
    spike = finding("01", "logs.spike", "error")
    assert spike.value["start"] == 7010 and spike.value["peak"] == pytest.approx(11.42026)
    assert spike.value["level"] == pytest.approx(6.444662) and not spike.value["recovered"]
    gn = finding("01", "logs.grad_norm_explosion")
    assert gn.value["onset"] == 7010 and gn.value["peak"] == pytest.approx(219645.978)
    f = facts("01")
    assert f["logs.spike_iteration"] == 7010 and f["logs.skip_range"] == "7001-7200"
    assert "7010-7220" in finding("01", "logs.gap").message


def test_02_rise_over_four_records():
    f = facts("02")
    assert f["logs.spike_iteration"] == 6910 and f["logs.spike_recovered"] is False
    assert finding("02", "logs.spike", "error").value["peak"] == pytest.approx(10.23865)


def test_03_grad_norm_leads_by_one_iteration():
    f = facts("03")
    assert f["logs.grad_norm_lead"] == 1 and f["logs.instability_onset"] == 11447
    assert finding("03", "logs.spike", "error").value["start"] == 11448


def test_04_spike_not_recovered_across_the_gap():
    spike = finding("04", "logs.spike", "error")
    assert spike.value["start"] == 8741 and spike.value["peak_iteration"] == 8743
    assert finding("04", "logs.grad_norm_explosion").value["onset"] == 8740
    assert facts("04")["logs.skipped_iterations"] == 3  # 65536 -> 16384 -> 8192: three halvings


def test_05_13b_spike_with_loss_scale_drop():
    spike = finding("05", "logs.spike", "error")
    assert spike.value["start"] == 29050 and spike.value["peak"] == pytest.approx(8.715872)
    ls = finding("05", "logs.loss_scale_collapse", "warning")
    assert "16x" in ls.message
    f = facts("05")
    assert "logs.grad_norm_explosion" not in f  # 'grad norm: 0.000' = not measured, nothing to judge


def test_06_warmup_end_and_no_event():
    f = facts("06")
    assert f["logs.warmup_end_iteration"] == 6503 and f["logs.spike"] is False
    assert not [x for x in probe("06").findings if x.severity != "info"]


def test_07_overflows_collapse_the_loss_scale():
    ls = finding("07", "logs.loss_scale_collapse", "error")
    assert "32x" in ls.message and ls.value["skipped"] == 6
    assert finding("07", "logs.spike", "error").value["start"] == 17062
    assert facts("07")["logs.grad_norm_explosion"] is False  # repeated grad norms of skipped steps


def test_08_176b_recovered_spike():
    spike = finding("08", "logs.spike", "warning")
    assert spike.value["peak_iteration"] == 31219 and spike.value["recovered"] and spike.value["end"] == 31250
    f = facts("08")
    assert f["logs.instability_onset"] == 31215 and f["logs.grad_norm_lead"] == 3
    assert f["logs.spike_recovered"] is True


@pytest.mark.parametrize("prefix", ["09", "10"])
def test_09_10_test_runs(prefix):
    assert "19 iterations skipped" in finding(prefix, "logs.loss_scale_startup").message
    f = facts(prefix)
    assert f["logs.warmup_end_iteration"] == 30 and f["logs.loss_scale_collapse"] is False
    assert f["logs.spike_recovered"] is True and f["logs.spike_after_warmup"] is True
    assert "CANCELLED" in finding(prefix, "logs.job_end", "info").message


def test_11_perf_run_diverges():
    assert finding("11", "logs.spike", "warning").value["recovered"]  # the warmup spike, 3 -> 29
    f = facts("11")
    assert f["logs.divergence"] is True and 31 <= f["logs.instability_onset"] <= 34
    assert finding("11", "logs.divergence", "error").value["peak"] == pytest.approx(20.43871)


def test_12_loss_scale_pinned_at_one():
    ls = finding("12", "logs.loss_scale_collapse", "error")
    assert "pinned at the minimum" in ls.message
    f = facts("12")
    assert f["logs.skipped_iterations"] == 1585 and f["logs.loss_scale_min"] == 1.0
    assert f["logs.divergence"] is True  # 10.65 at the start, 12.55 at 2500
    assert "logs.warmup_end_iteration" not in f  # the LR peaked inside the '...' gap


def test_13_nanogpt_spike():
    spike = finding("13", "logs.spike", "error")
    assert spike.value["start"] == 110 and spike.value["peak"] == pytest.approx(270.3931)
    assert facts("13")["logs.skip_range"] == "101-300"


def test_14_nanogpt_nan():
    f = facts("14")
    assert f["logs.nan"] is True and f["logs.nan_iteration"] == 110 and f["logs.nan_early"] is True


def test_15_modded_nanogpt():
    f = facts("15")
    assert f["logs.nan"] is False and f["logs.divergence"] is False and f["logs.eval_loss_rising"] is False
    assert finding("15", "logs.blips", "info").value["count"] > 50


def test_16_trainer_state_with_lr_key():
    f = facts("16")
    assert f["logs.lr_peak"] == 1e-4 and f["logs.checkpoint_interval"] == 1000
    assert not [x for x in probe("16").findings if x.severity != "info"]


def test_17_finetune():
    f = facts("17")
    assert f["logs.warmup_end_iteration"] == 6 and f["logs.lr_peak"] == pytest.approx(2e-4)
    assert not [x for x in probe("17").findings if x.severity != "info"]
