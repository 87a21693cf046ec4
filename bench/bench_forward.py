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
from troubleshoot.probes import ProbeContext, gradflow, masks  # noqa: E402
from troubleshoot.probes.nonfinite import ActivationMonitor  # noqa: E402


def gpt2(layers: int, width: int, vocab: int = 50257):
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=max(1, width // 64), vocab_size=vocab)
    return GPT2LMHeadModel(cfg).eval()


def interleaved(a, b, runs: int) -> tuple[float, float, float]:
    """Median seconds of a() and b(), alternating, after one warm-up each; plus the ratio of the
    fastest runs (other processes only ever add time, so min/min is the steadier ratio)."""
    a(), b()
    ta, tb = [], []
    for _ in range(runs):
        for f, ts in ((a, ta), (b, tb)):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            f()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
    return statistics.median(ta), statistics.median(tb), min(tb) / min(ta)


def monitor_overhead(model, ids, runs: int, mode: str) -> dict:
    def plain():
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)

    def monitored():
        with torch.no_grad(), ActivationMonitor(model, mode) as mon:
            model(input_ids=ids, use_cache=False)
        mon.results()

    base, mon, best = interleaved(plain, monitored, runs)
    return {"plain_s": base, "monitored_s": mon, "ratio": mon / base, "ratio_min": best}


def hf_debug_overhead(model, ids, runs: int) -> dict:
    from transformers.debug_utils import DebugUnderflowOverflow

    def plain():
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)

    debug = DebugUnderflowOverflow(model)  # registers a forward hook on every module
    hooked = [m for m in model.modules() if m._forward_hooks]
    saved = {m: dict(m._forward_hooks) for m in hooked}

    def set_hooks(on: bool) -> None:
        for m in hooked:
            m._forward_hooks.clear()
            if on:
                m._forward_hooks.update(saved[m])

    def with_debug():
        set_hooks(True)
        try:
            plain()
        finally:
            set_hooks(False)

    set_hooks(False)
    base, dbg, best = interleaved(plain, with_debug, runs)
    del debug
    return {"plain_s": base, "debug_s": dbg, "ratio": dbg / base, "ratio_min": best}


def probe_times(model, device: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        model.config.dtype = torch.float32
        model.save_pretrained(tmp)
        ctx = ProbeContext([Artifact(tmp, "hf-checkpoint")], device=device)
        from troubleshoot.loaders.model import model_for

        t0 = time.perf_counter()
        req = model_for(ctx)
        t1 = time.perf_counter()
        g = gradflow.run(ctx)
        t2 = time.perf_counter()
        m = masks.run(ctx)
        t3 = time.perf_counter()
    errs = [f.id for f in g.findings + m.findings if f.severity == "error"]
    return {"params_m": req.model.n_params / 1e6 if req.model else None, "load_s": t1 - t0,
            "gradflow_s": t2 - t1, "masks_s": t3 - t2, "error_findings": errs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small models, for a smoke run")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    big = (4, 256) if args.quick else (12, 768)
    out = {"device": torch.cuda.get_device_name() if device == "cuda" else f"cpu x{torch.get_num_threads()} threads",
           "torch": torch.__version__}

    model = gpt2(*big)
    out["probes"] = probe_times(model, device)
    model = model.to(device)
    gen = torch.Generator().manual_seed(0)
    name = f"gpt2_{big[0]}x{big[1]}"
    for shape in ((2, 64), (4, 256)):
        ids = torch.randint(0, 50257, shape, generator=gen).to(device)
        for mode in ("finite", "absmax"):
            out[f"{name} {shape[0]}x{shape[1]} {mode}"] = monitor_overhead(model, ids, args.runs, mode)
    del model

    small = gpt2(8, 512).to(device)
    ids = torch.randint(0, 50257, (4, 256), generator=gen).to(device)
    for mode in ("finite", "absmax"):
        out[f"gpt2_8x512 4x256 {mode}"] = monitor_overhead(small, ids, args.runs, mode)
    out["gpt2_8x512 4x256 HF debug"] = hf_debug_overhead(small, ids, max(3, args.runs // 2))

    if args.json:
        print(json.dumps(out, indent=2))
        return
    p = out["probes"]
    print(f"device: {out['device']}, torch {out['torch']}")
    print(f"GPT-2 {p['params_m']:.0f}M from an HF folder: load {p['load_s']:.1f}s, gradflow "
          f"{p['gradflow_s']:.1f}s, masks {p['masks_s']:.1f}s, error findings: {p['error_findings'] or 'none'}")
    print(f"first-non-finite localisation vs one plain forward (medians of {args.runs} interleaved runs):")
    for key, r in out.items():
        if isinstance(r, dict) and "ratio" in r:
            hooked = r.get("monitored_s", r.get("debug_s"))
            print(f"  {key:30s} plain {r['plain_s'] * 1e3:8.1f} ms  hooked {hooked * 1e3:8.1f} ms"
                  f"  ratio {r['ratio']:.3f}x (min/min {r['ratio_min']:.3f}x)")


if __name__ == "__main__":
    main()
