"""Benchmark the live guard (DESIGN.md "Performance budgets": <= 1 % of a step while nothing is wrong).

    python bench/bench_guard.py              # GPT-2 124M, batch 4 x 128, AdamW + clipping, CPU or CUDA
    python bench/bench_guard.py --quick      # only the tiny model
    python bench/bench_guard.py --json       # one JSON object on stdout

For a realistic step (GPT-2 124M) and a tiny one (2 layers x 32), it measures:

1. the same training step unguarded, with ``Guard`` (the loop's clipped norm reused), with
   ``Guard`` computing its own fused grad norm, with Hugging Face's ``DebugUnderflowOverflow``
   (what ``TrainingArguments(debug="underflow_overflow")`` installs) and under
   ``torch.autograd.detect_anomaly()``; variants interleaved (A B C A B C ...) so that load from
   other processes hits them alike; median seconds per step.
2. the guard's own time per step (median), timed around its calls (precise where the side-by-side
   difference drowns in the noise of a shared machine).
3. detection latency (steps from the injected NaN to the trip) and the incident cost: replay
   (one forward + backward with hooks), writing the bundle, diagnosing it.

Nothing is downloaded: the models are built from configs with random weights.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402
from transformers.debug_utils import DebugUnderflowOverflow  # noqa: E402

from troubleshoot.live import Guard  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def gpt2(layers: int, width: int, vocab: int) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=max(1, width // 64), vocab_size=vocab)
    return GPT2LMHeadModel(cfg).to(DEVICE).train()


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


class Loop:
    """One model + optimizer + batch; ``step(variant)`` runs one training step of that variant."""

    def __init__(self, layers: int, width: int, vocab: int, rows: int, seq: int) -> None:
        self.model = gpt2(layers, width, vocab)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-5)
        ids = torch.randint(0, vocab, (rows, seq), device=DEVICE)
        self.batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}
        self.out = Path(tempfile.mkdtemp(prefix="bench-guard-"))
        self.guard = Guard(self.model, self.opt, policy="skip", out_dir=self.out)
        self.guard_own = Guard(self.model, self.opt, policy="skip", out_dir=self.out)
        self.guard_times: list[float] = []

    def _fwd_bwd(self):
        loss = self.model(**self.batch).loss
        loss.backward()
        return loss, torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)

    def plain(self) -> None:
        self._fwd_bwd()
        self.opt.step()
        self.opt.zero_grad()
        _sync()

    def guarded(self, own_norm: bool = False) -> None:
        guard = self.guard_own if own_norm else self.guard
        t0 = time.perf_counter()
        guard.begin(self.batch)
        t1 = time.perf_counter()
        loss, norm = self._fwd_bwd()
        t2 = time.perf_counter()
        ok = guard.after_backward(loss, grad_norm=None if own_norm else norm)
        t3 = time.perf_counter()
        if not own_norm:
            self.guard_times.append((t1 - t0) + (t3 - t2))
        if ok:
            self.opt.step()
        self.opt.zero_grad()
        _sync()

    def hf_debug(self) -> None:
        DebugUnderflowOverflow(self.model, max_frames_to_save=21)  # hooks every module, as HF does
        try:
            self.plain()
        finally:  # it keeps no handles: clear the hooks it registered (the bench model has no others)
            self.model.apply(lambda m: m._forward_hooks.clear())

    def anomaly(self) -> None:
        with torch.autograd.detect_anomaly(check_nan=True):
            self.plain()


def interleaved(fns: dict, runs: int) -> dict:
    for f in fns.values():
        f()
    times: dict = {k: [] for k in fns}
    for _ in range(runs):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def overhead(name: str, loop: Loop, runs: int) -> dict:
    loop.guard_times = []
    med = interleaved({"plain": loop.plain, "guard": loop.guarded, "guard_own_norm": lambda: loop.guarded(True),
                       "hf_debug_underflow_overflow": loop.hf_debug, "detect_anomaly": loop.anomaly}, runs)
    own = statistics.median(loop.guard_times)
    base = med["plain"]
    return {"model": name, "step_s": round(base, 5),
            "ratio": {k: round(v / base, 3) for k, v in med.items() if k != "plain"},
            "guard_own_time_s": round(own, 6), "guard_own_fraction": round(own / base, 5),
            "incidents": len(loop.guard.incidents) + len(loop.guard_own.incidents)}


def incident_cost(loop: Loop) -> dict:
    """Latency (steps) and time of one incident: a NaN injected into the inputs at step 20."""
    guard = Guard(loop.model, loop.opt, policy="skip", out_dir=loop.out / "nan")
    t_step = []
    for step in range(1, 22):
        batch = loop.batch
        if step == 20:
            embeds = loop.model.get_input_embeddings()(batch["input_ids"]).detach().clone()
            embeds[0, 1, 0] = float("nan")
            batch = {"inputs_embeds": embeds, "labels": batch["labels"]}
        t0 = time.perf_counter()
        with guard.watch(batch):
            loss = loop.model(**batch).loss
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(loop.model.parameters(), 1.0)
            t1 = time.perf_counter()
            if guard.after_backward(loss, grad_norm=norm):
                loop.opt.step()
            t2 = time.perf_counter()
            loop.opt.zero_grad()
        _sync()
        t_step.append((t1 - t0, t2 - t1))
        if guard.incidents:
            break
    first = int(guard.incidents[0].name) if guard.incidents else None
    plain = statistics.median(a for a, _ in t_step[:-1])
    handling = t_step[-1][1]
    t0 = time.perf_counter()
    from troubleshoot.live.replay import replay
    replay(loop.model, loop.batch, lambda m, b: m(**b), None)
    _sync()
    replay_s = time.perf_counter() - t0
    return {"nan_injected_at": 20, "tripped_at": first, "latency_steps": None if first is None else first - 20,
            "fwd_bwd_s": round(plain, 4), "incident_handling_s": round(handling, 3),
            "replay_s": round(replay_s, 4), "replay_vs_fwd_bwd": round(replay_s / plain, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--runs", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: steadier on a shared machine)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    sizes = [("tiny gpt2 2x32, batch 4x16", (2, 32, 64, 4, 16), a.runs or 100)]
    if not a.quick:
        sizes.append(("gpt2 124M 12x768, batch 4x128", (12, 768, 50257, 4, 128), a.runs or 5))
    out = {"device": DEVICE, "threads": torch.get_num_threads(), "results": []}
    for name, dims, runs in sizes:
        loop = Loop(*dims)
        res = overhead(name, loop, runs)
        res["incident"] = incident_cost(loop)
        out["results"].append(res)
        if not a.json:
            print(json.dumps(res), flush=True)
    if a.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
