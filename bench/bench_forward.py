"""Benchmark the model-running probes (DESIGN.md "Performance budgets").

    python bench/bench_forward.py            # GPT-2 124M on CPU (or CUDA when present)
    python bench/bench_forward.py --quick    # a 4-layer x 256 model, for a smoke run
    python bench/bench_forward.py --json     # one JSON object on stdout

What it measures, each as the median of --runs repetitions (A/B runs interleaved so that load
from other processes hits both sides alike):

1. gradflow probe wall time on a ~100M-parameter GPT-2 (12 layers x 768, vocab 50257) saved as an
   HF folder: building the model from the folder, then ``gradflow.run`` and ``masks.run``.
   Budget: well under a minute each on CPU.
2. overhead of the first-non-finite localisation (``ActivationMonitor``: one number per module
   output, one host sync) relative to one plain forward pass of the same model and batch, in
   ``finite`` mode (the check) and ``absmax`` mode (the check plus the fp16-range scan that the
   probe runs on fp32 passes). Budget: at most 1.2x.
3. for comparison, Hugging Face's ``DebugUnderflowOverflow`` on a GPT-2 of 8 layers x 512, and our
   monitor on that same model (DESIGN quotes 1.77x for HF's).

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

from troubleshoot.observations import Artifact  # noqa: E402
from troubleshoot.probes import ProbeContext
from troubleshoot.probes.forward import gradflow, masks  # noqa: E402
from troubleshoot.probes.forward.nonfinite import ActivationMonitor  # noqa: E402


def gpt2(layers: int, width: int, vocab: int = 50257):
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=max(1, width // 64), vocab_size=vocab)
    return GPT2LMHeadModel(cfg).eval()


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def interleaved(fns: dict, runs: int) -> dict:
    """Seconds per run of each function, called in turn (A B C A B C ...) after one warm-up,
    so that load from other processes hits every variant alike."""
    for f in fns.values():
        f()
    times: dict = {k: [] for k in fns}
    for _ in range(runs):
        for k, f in fns.items():
            _sync()
            t0 = time.perf_counter()
            f()
            _sync()
            times[k].append(time.perf_counter() - t0)
    return times


def localisation_overhead(model, ids, runs: int, hf_debug: bool = False) -> dict:
    """Plain forward vs the monitor in both modes (and HF's DebugUnderflowOverflow)."""

    def plain():
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)

    def monitored(mode):
        def f():
            with torch.no_grad(), ActivationMonitor(model, mode) as mon:
                model(input_ids=ids, use_cache=False)
            mon.results()
        return f

    fns = {"plain": plain, "finite": monitored("finite"), "absmax": monitored("absmax")}
    if hf_debug:
        fns["hf_debug"] = _with_hf_debug(model, plain)
    times = interleaved(fns, runs)
    base_med, base_min = statistics.median(times["plain"]), min(times["plain"])
    out = {"plain_ms": base_med * 1e3}
    for k, ts in times.items():
        if k != "plain":
            out[k] = {"ms": statistics.median(ts) * 1e3, "ratio": statistics.median(ts) / base_med,
                      "ratio_min": min(ts) / base_min}
    out["replay"] = replay_estimate(model, ids, base_min)
    return out


def _with_hf_debug(model, plain):
    """HF's DebugUnderflowOverflow hooks, switched on only inside the returned function."""
    from transformers.debug_utils import DebugUnderflowOverflow

    model._llmfix_debug = DebugUnderflowOverflow(model)  # registers a hook on every module
    saved = {m: dict(m._forward_hooks) for m in model.modules() if m._forward_hooks}

    def toggle(on: bool) -> None:
        for m, hooks in saved.items():
            m._forward_hooks.clear()
            if on:
                m._forward_hooks.update(hooks)

    def run():
        toggle(True)
        try:
            plain()
        finally:
            toggle(False)

    toggle(False)
    return run


def replay_estimate(model, ids, plain_s: float, reps: int = 5) -> dict:
    """Steadier than wall-clock ratios on a busy machine: time only the monitor's reductions,
    replayed on the outputs captured from one forward, and add them to the fastest plain run."""
    from troubleshoot.probes.forward.nonfinite import absmax, finite_sum, float_tensors

    outs = []
    handles = [m.register_forward_hook(lambda m, a, o: outs.append(float_tensors(o)))
               for m in model.modules()]
    with torch.no_grad():
        model(input_ids=ids, use_cache=False)
    for h in handles:
        h.remove()
    est = {}
    for mode, reduce in (("finite", finite_sum), ("absmax", absmax)):
        best = float("inf")
        for _ in range(reps):
            _sync()
            t0 = time.perf_counter()
            vals, last = [], None
            for ts in outs:  # same dedupe as the monitor: a tensor just measured is not re-read
                if ts and ts[0] is not last:
                    vals.append(reduce(ts))
                    last = ts[0]
            torch.stack(vals).cpu()
            best = min(best, time.perf_counter() - t0)
        est[mode] = 1 + best / plain_s
    return est


def probe_times(model, device: str) -> dict:
    """Wall time of building the model from an HF folder, gradflow and masks (fp32 checkpoint);
    gradflow again with a user batch of 8 x 256 (cut to the caps: CPU_MAX_TOKENS on CPU), and on
    the same model saved in bf16 (two passes: bf16, then fp32)."""
    from troubleshoot.probes.forward.model import model_for
    from troubleshoot.probes.forward.caps import MAX_BATCH, MAX_SEQ

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder, batch = Path(tmp) / "fp32", Path(tmp) / "batch.pt"
        model.config.dtype = torch.float32
        model.save_pretrained(folder)
        ids = torch.randint(0, model.config.vocab_size, (MAX_BATCH, MAX_SEQ), generator=torch.Generator().manual_seed(1))
        torch.save({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, batch)
        ctx = ProbeContext([Artifact(str(folder), "hf-checkpoint")], device=device)
        t0 = time.perf_counter()
        req = model_for(ctx)
        t1 = time.perf_counter()
        g = gradflow.run(ctx)
        t2 = time.perf_counter()
        m = masks.run(ctx)
        t3 = time.perf_counter()
        out |= {"params_m": req.model.n_params / 1e6, "load_s": t1 - t0, "gradflow_s": t2 - t1,
                "masks_s": t3 - t2}
        errs = [f.id for f in g.findings + m.findings if f.severity == "error"]
        ctx = ProbeContext([Artifact(str(folder), "hf-checkpoint"), Artifact(str(batch), "batch")], device=device)
        model_for(ctx)
        t0 = time.perf_counter()
        g = gradflow.run(ctx)
        out["gradflow_8x256_s"] = time.perf_counter() - t0
        errs += [f.id for f in g.findings if f.severity == "error"]
        folder16 = Path(tmp) / "bf16"
        model.to(torch.bfloat16).config.dtype = torch.bfloat16
        model.save_pretrained(folder16)
        model.float()
        ctx = ProbeContext([Artifact(str(folder16), "hf-checkpoint")], device=device)
        model_for(ctx)
        t0 = time.perf_counter()
        g = gradflow.run(ctx)
        t1 = time.perf_counter()
        m = masks.run(ctx)
        out |= {"bf16_gradflow_s": t1 - t0, "bf16_masks_s": time.perf_counter() - t1}
        errs += [f.id for f in g.findings + m.findings if f.severity == "error"]
    out["error_findings"] = errs
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small models, for a smoke run")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads for the overhead ratios (0: torch's default); 1 gives steadier "
                         "ratios on a machine shared with other jobs")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    big = (4, 256) if args.quick else (12, 768)
    out = {"device": torch.cuda.get_device_name() if device == "cuda" else f"cpu x{torch.get_num_threads()} threads",
           "torch": torch.__version__}

    model = gpt2(*big)
    out["probes"] = probe_times(model, device)
    if args.threads:
        torch.set_num_threads(args.threads)
        out["overhead_threads"] = args.threads
    model = model.to(device)
    gen = torch.Generator().manual_seed(0)
    name = f"gpt2_{big[0]}x{big[1]}"
    for shape in ((2, 64), (4, 256)):
        ids = torch.randint(0, 50257, shape, generator=gen).to(device)
        out[f"{name} batch {shape[0]}x{shape[1]}"] = localisation_overhead(model, ids, args.runs)
    del model

    small = gpt2(8, 512).to(device)
    ids = torch.randint(0, 50257, (4, 256), generator=gen).to(device)
    out["gpt2_8x512 batch 4x256"] = localisation_overhead(small, ids, args.runs, hf_debug=True)

    if args.json:
        print(json.dumps(out, indent=2))
        return
    p = out["probes"]
    print(f"device: {out['device']}, torch {out['torch']}")
    print(f"GPT-2 {p['params_m']:.0f}M from an HF folder: load {p['load_s']:.1f}s, gradflow "
          f"{p['gradflow_s']:.1f}s, masks {p['masks_s']:.1f}s; gradflow on an 8x256 batch (capped) "
          f"{p['gradflow_8x256_s']:.1f}s; saved in bf16: gradflow {p['bf16_gradflow_s']:.1f}s, masks "
          f"{p['bf16_masks_s']:.1f}s; error findings: {p['error_findings'] or 'none'}")
    threads = f", {args.threads} torch thread(s)" if args.threads else ""
    print(f"first-non-finite localisation vs one plain forward ({args.runs} interleaved runs{threads}; "
          "ratio of medians / of fastest runs / replayed reductions):")
    for key, r in out.items():
        if not (isinstance(r, dict) and "plain_ms" in r):
            continue
        print(f"  {key}: plain {r['plain_ms']:.1f} ms")
        for mode in ("finite", "absmax", "hf_debug"):
            if mode in r:
                replay = f" / {r['replay'][mode]:.3f}x" if mode in r["replay"] else ""
                print(f"    {mode:9s} {r[mode]['ms']:8.1f} ms  {r[mode]['ratio']:.3f}x / "
                      f"{r[mode]['ratio_min']:.3f}x{replay}")


if __name__ == "__main__":
    main()
