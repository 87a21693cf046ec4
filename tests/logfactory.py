"""Training logs in the real line formats, with events injected at known iterations.

``simulate(...)`` makes the per-iteration series of a run (loss, LR, grad norm, fp16 loss scale)
with optional events; the writers print it the way Megatron-LM (exactly the seed-002 line
layout), DeepSpeed, the HF Trainer (trainer_state.json and its printed dicts), nanoGPT,
modded-nanogpt, JSONL and CSV do. Deterministic for a given seed.
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Spike:
    at: int                    # first iteration with the raised loss
    height: float = 2.0        # loss multiplier at the peak
    recover: int | None = 200  # iterations to get back; None = never (settles at settle x)
    settle: float = 1.15
    gn_lead: int | None = 20   # grad norm explodes this many iterations earlier (None: no explosion)
    gn_factor: float = 20.0


@dataclass
class Run:
    iters: int = 20000
    interval: int = 10
    warmup: int = 2000
    peak_lr: float = 6e-5
    loss0: float = 10.8
    floor: float = 2.5
    noise: float = 0.01        # relative loss noise of one logged (averaged) value
    gn: float = 1.5
    fp16: bool = True
    save_every: int | None = 1000
    val_every: int | None = 1000
    spikes: list[Spike] = field(default_factory=list)
    nan_at: int | None = None
    diverge_at: int | None = None      # slow upward drift from here on
    diverge_rate: float = 0.5          # relative loss increase per 10k iterations
    ls_decline: tuple[int, int] | None = None   # (start, end): loss scale halves steadily
    gn_trend: tuple[int, int, float] | None = None  # (start, end, factor): grad norm grows steadily
    plateau_at: int | None = None
    seed: int = 0


def simulate(run: Run) -> list[dict]:
    """One dict per logged iteration: it, loss, lr, gn, ls, skipped, nan, val (or None)."""
    rnd = random.Random(run.seed)
    out = []
    ls, clean = 65536.0, 0
    for it in range(run.interval, run.iters + 1, run.interval):
        t = it if run.plateau_at is None else min(it, run.plateau_at)
        base = run.floor + (run.loss0 - run.floor) * (1 + t / 300) ** -0.45
        if run.diverge_at is not None and it > run.diverge_at:
            base *= 1 + run.diverge_rate * (it - run.diverge_at) / 10000
        lr = run.peak_lr * min(1.0, it / run.warmup) if run.warmup else run.peak_lr
        if it > run.warmup:
            lr = run.peak_lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (it - run.warmup) / (run.iters - run.warmup))))
        gn = run.gn * math.exp(rnd.gauss(0, 0.15))
        if run.gn_trend and it > run.gn_trend[0]:
            a, b, factor = run.gn_trend
            gn *= factor ** ((min(it, b) - a) / (b - a))
        mult = 1.0
        for sp in run.spikes:
            if it >= sp.at:
                k = it - sp.at
                if sp.recover is None:
                    mult *= max(sp.settle, sp.height * math.exp(-k / 100)) if k else sp.height
                elif k <= sp.recover:
                    mult *= 1 + (sp.height - 1) * (1 - k / sp.recover) ** 2
            if sp.gn_lead is not None and sp.at - sp.gn_lead <= it <= sp.at + run.interval * 3:
                gn *= sp.gn_factor
        loss = base * mult * (1 + rnd.gauss(0, run.noise))
        skipped = 0
        if run.fp16:
            if run.ls_decline and run.ls_decline[0] <= it <= run.ls_decline[1]:
                if (it - run.ls_decline[0]) % (run.interval * 20) == 0:
                    ls, skipped, clean = max(1.0, ls / 2), 1, 0
            else:
                clean += run.interval
                if clean >= 2000 and not (run.ls_decline and it > run.ls_decline[1]):
                    ls, clean = ls * 2, 0
                    if ls > 131072:
                        ls, skipped = ls / 2, 1
        nan = run.nan_at is not None and it >= run.nan_at
        val = None
        if run.val_every and it % run.val_every == 0:
            val = base * mult * 1.05
        out.append({"it": it, "loss": float("nan") if nan else loss, "lr": lr, "gn": gn,
                    "ls": ls if run.fp16 else None, "skipped": skipped, "nan": int(nan), "val": val})
    return out


# ---------------------------------------------------------------------------------------------
# Megatron-LM (the seed-002 layout), with DeepSpeed lines interleaved

def megatron_line(it: int, total: int, loss: float, lr: float, ls: float | None, gn: float | None,
                  skipped: int = 0, nan: int = 0, gbs: int = 96, ms: float = 18706.1) -> str:
    """`` iteration     7000/  159576 | consumed samples: ... |`` exactly as in seed 002."""
    parts = [f" iteration {it:8d}/{total:8d}", f" consumed samples: {it * gbs:12d}",
             f" elapsed time per iteration (ms): {ms:.1f}", f" learning rate: {lr:.3E}",
             f" global batch size: {gbs:5d}"]
    if loss is not None:
        parts.append(f" lm loss: {loss:.6E}")
    if ls is not None:
        parts.append(f" loss scale: {ls:.1f}")
    if gn is not None:
        parts.append(f" grad norm: {gn:.3f}")
    parts += [" num zeros: 0.0", f" number of skipped iterations: {skipped:3d}",
              f" number of nan iterations: {nan:3d}"]
    return " |".join(parts) + " |"


def validation_lines(it: int, val: float) -> list[str]:
    dash = "-" * 96
    return [dash, f" validation loss at iteration {it} | lm loss value: {val:.6E} | "
            f"lm loss PPL: {math.exp(min(val, 700)):.6E} | ", dash]


def overflow_line(old: float, new: float) -> str:
    return ("[2022-01-19 13:09:13,305] [INFO] [stage_1_and_2.py:1644:step] [deepscale] OVERFLOW! "
            f"Rank 0 Skipping step. Attempted loss scale: {old:.1f}, reducing to {new:.1f}")


def write_megatron(path: Path, rows: list[dict], total: int | None = None, save_every: int | None = None,
                   deepspeed: bool = True, noise_lines: bool = True) -> Path:
    total = total or rows[-1]["it"]
    prev_ls = None
    with open(path, "w") as f:
        if noise_lines:
            f.write("using world size: 64, data-parallel-size: 1, tensor-model-parallel size: 4\n")
            f.write("training ...\n")
        for r in rows:
            if deepspeed and r["skipped"] and r["ls"] is not None and prev_ls is not None:
                f.write(overflow_line(prev_ls, r["ls"]) + "\n")
            f.write(megatron_line(r["it"], total, r["loss"], r["lr"], r["ls"],
                                  None if r["skipped"] else r["gn"], r["skipped"], r["nan"]) + "\n")
            if noise_lines:
                f.write("time (ms) | forward-compute: 175.62 | backward-compute: 513.68\n")
            if r["val"] is not None:
                f.write("\n".join(validation_lines(r["it"], r["val"])) + "\n")
            if save_every and r["it"] % save_every == 0:
                f.write(f"saving checkpoint at iteration {r['it']:7d} to /scratch/checkpoints\n")
                f.write(f"  successfully saved checkpoint at iteration {r['it']:7d} to /scratch/checkpoints\n")
            prev_ls = r["ls"]
    return path


# ---------------------------------------------------------------------------------------------
# other formats

def write_trainer_state(path: Path, rows: list[dict], save_steps: int = 500, lr_key: str = "learning_rate") -> Path:
    hist = []
    for r in rows:
        hist.append({"epoch": r["it"] / rows[-1]["it"], "grad_norm": r["gn"], lr_key: r["lr"],
                     "loss": r["loss"], "step": r["it"]})
        if r["val"] is not None:
            hist.append({"epoch": r["it"] / rows[-1]["it"], "eval_loss": r["val"], "eval_runtime": 1.0,
                         "step": r["it"]})
    hist.append({"epoch": 1.0, "step": rows[-1]["it"], "total_flos": 1e15, "train_loss": 3.0,
                 "train_runtime": 100.0})
    state = {"best_metric": None, "epoch": 1.0, "eval_steps": 500, "global_step": rows[-1]["it"],
             "is_world_process_zero": True, "log_history": hist, "logging_steps": rows[1]["it"] - rows[0]["it"],
             "max_steps": rows[-1]["it"], "save_steps": save_steps, "train_batch_size": 8}
    path.write_text(json.dumps(state, indent=2))
    return path


def write_hf_stdout(path: Path, rows: list[dict]) -> Path:
    with open(path, "w") as f:
        for r in rows:
            f.write(f"{{'loss': {r['loss']:.4f}, 'grad_norm': {r['gn']:.4f}, "
                    f"'learning_rate': {r['lr']:.6g}, 'epoch': {r['it'] / rows[-1]['it']:.2f}}}\n")
            if r["val"] is not None:
                f.write(f"{{'eval_loss': {r['val']:.4f}, 'eval_runtime': 1.5, 'epoch': 0.5}}\n")
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps({"step": r["it"], "train/loss": r["loss"], "train/lr": r["lr"],
                                "train/grad_norm": r["gn"]}) + "\n")
    return path


def write_csv(path: Path, rows: list[dict]) -> Path:
    with open(path, "w") as f:
        f.write("step,loss,learning_rate,grad_norm\n")
        for r in rows:
            f.write(f"{r['it']},{r['loss']:.5f},{r['lr']:.6g},{r['gn']:.4f}\n")
    return path


def write_nanogpt(path: Path, rows: list[dict], eval_every: int = 1000) -> Path:
    with open(path, "w") as f:
        for r in rows:
            loss = "nan" if math.isnan(r["loss"]) else f"{r['loss']:.4f}"
            f.write(f"iter {r['it']}: loss {loss}, time 460.33ms, mfu 48.08%\n")
            if r["it"] % eval_every == 0:
                f.write(f"step {r['it']}: train loss {r['loss']:.4f}, val loss {(r['val'] or r['loss']):.4f}\n")
                f.write("saving checkpoint to out\n")
    return path


def write_modded(path: Path, rows: list[dict]) -> Path:
    total = rows[-1]["it"]
    with open(path, "w") as f:
        f.write("Running pytorch 2.4.1+cu121 compiled for CUDA 12.1\n")
        for r in rows:
            f.write(f"step:{r['it']}/{total} train_loss:{r['loss']:.4f} train_time:{r['it'] * 1719}ms "
                    "step_avg:1719.17ms\n")
            if r["val"] is not None:
                f.write(f"step:{r['it']}/{total} val_loss:{r['val']:.4f} train_time:{r['it'] * 1719}ms "
                        "step_avg:1719.17ms\n")
    return path
