"""Benchmark: the weights probe streams a >4 GB sharded safetensors checkpoint in bounded memory.

DESIGN.md budget: peak RSS bounded by the largest tensor plus a constant, whatever the checkpoint
size; throughput at least half of simply reading the same tensors.

    python bench/bench_weights.py                 # 6 shards x 11 tensors x 64 MiB (bf16) = 4.1 GiB
    python bench/bench_weights.py --shards 2      # quicker, same per-tensor size
    python bench/bench_weights.py --keep DIR      # write (or reuse) the checkpoint in DIR, keep it

Each measurement runs in its own subprocess (peak RSS is that child's ``ru_maxrss``, cross-checked
with the parent's RUSAGE_CHILDREN; the parent imports no torch and builds the checkpoint in a child
too, because Linux carries a process's peak RSS across fork and exec), with the page cache warm for
all of them (every shard is read once first), so disk speed does not enter. Compared:

- ``import``  : python + torch + llmfix imported, nothing read: the constant part of RSS.
- ``probe``   : ``weights.run`` on the folder (the real probe: detect, stream, stats, findings).
- ``plain``   : safe_open + get_tensor + clone() for every tensor: the bytes of every tensor read
                into memory, one tensor at a time -- "simply reading every tensor".
- ``touch``   : safe_open + get_tensor and one element per page: the floor of reading through
                mmap, which faults pages in but never moves the data through the CPU.
The temp checkpoint is deleted afterwards unless ``--keep`` was given.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TENSOR_MB = 64
ROWS, COLS = 8192, 4096  # bf16: 64 MiB


def build(folder: Path, shards: int, per_shard: int) -> int:
    """Write a Llama-shaped sharded bf16 checkpoint with its index and config; returns bytes."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    n_layers = shards * per_shard // 3 + 1
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": COLS, "intermediate_size": ROWS, "num_hidden_layers": n_layers,
        "num_attention_heads": 32, "vocab_size": 32000, "initializer_range": 0.02, "torch_dtype": "bfloat16"}))
    base = torch.randn(ROWS * COLS) * 0.02
    weight_map, k, total = {}, 0, 0
    for s in range(1, shards + 1):
        name = f"model-{s:05d}-of-{shards:05d}.safetensors"
        tensors = {}
        for _ in range(per_shard):
            layer, part = divmod(k, 3)
            key = f"model.layers.{layer}.mlp.{('gate_proj', 'up_proj', 'down_proj')[part]}.weight"
            t = base.roll(k * 9973).to(torch.bfloat16).reshape(ROWS, COLS)
            tensors[key] = t if part < 2 else t.t().contiguous()
            weight_map[key] = name
            k += 1
        save_file(tensors, str(folder / name), metadata={"format": "pt"})
        total += (folder / name).stat().st_size
        del tensors
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                     "weight_map": weight_map}))
    return total


def child(mode: str, folder: Path) -> None:
    """One measurement; prints JSON with seconds and this process's peak RSS."""
    import torch  # noqa: F401 - part of the constant
    from safetensors import safe_open

    from troubleshoot.loaders import detect
    from troubleshoot.probes import ProbeContext, weights

    shards = sorted(folder.glob("*.safetensors"))
    t0 = time.perf_counter()
    extra = {}
    if mode == "probe":
        obs = weights.run(ProbeContext([detect(folder)]))
        extra = {"findings": len(obs.findings), "nonfinite": obs.facts["weights.nonfinite"].value}
    elif mode in ("plain", "touch"):
        for f in shards:
            with safe_open(str(f), framework="pt") as st:
                for key in st.keys():
                    t = st.get_tensor(key)
                    if mode == "plain":
                        t = t.clone()
                    else:
                        t.view(-1).view(torch.uint8)[::4096].sum()
                    del t
    seconds = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    print(json.dumps({"mode": mode, "seconds": seconds, "max_rss": rss, **extra}))


def measure(mode: str, folder: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(folder)], capture_output=True, text=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    result["children_max_rss"] = after if after > before * 1024 else None
    return result


def warm(folder: Path) -> None:
    for f in sorted(folder.glob("*.safetensors")):
        with open(f, "rb", buffering=0) as fh:
            while fh.read(64 << 20):
                pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, default=6)
    ap.add_argument("--per-shard", type=int, default=11)
    ap.add_argument("--repeat", type=int, default=2, help="runs per mode; the best time is kept")
    ap.add_argument("--keep", type=Path, help="write the checkpoint here and keep it")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        mode, folder = args.child[0], Path(args.child[1])
        if mode.startswith("build:"):
            shards, per_shard = map(int, mode.split(":")[1:])
            print(build(folder, shards, per_shard))
        else:
            child(mode, folder)
        return 0
    need = args.shards * args.per_shard * TENSOR_MB * 2**20
    where = args.keep or Path(tempfile.mkdtemp(prefix="llmfix-bench-"))
    free = shutil.disk_usage(where if where.exists() else where.parent).free
    if not any(where.glob("*.safetensors")) and free < need * 1.2:
        print(f"not enough disk: need {need / 2**30:.1f} GiB (+20 %), {free / 2**30:.1f} GiB free at {where}")
        return 1
    try:
        if not any(where.glob("*.safetensors")):
            t0 = time.perf_counter()
            # in a child: Linux carries a process's peak RSS across exec, so the parent stays small
            size = int(subprocess.run([sys.executable, __file__, "--child", f"build:{args.shards}:{args.per_shard}",
                                       str(where)], capture_output=True, text=True, check=True).stdout.split()[-1])
            print(f"wrote {size / 2**30:.2f} GiB in {args.shards} shards, {args.shards * args.per_shard} tensors of "
                  f"{TENSOR_MB} MiB, in {time.perf_counter() - t0:.0f} s")
        size = sum(f.stat().st_size for f in where.glob("*.safetensors"))
        warm(where)
        results = {}
        for mode in ("import", "probe", "plain", "touch"):
            runs = [measure(mode, where) for _ in range(args.repeat if mode != "import" else 1)]
            results[mode] = min(runs, key=lambda r: r["seconds"])
            results[mode]["max_rss"] = max(r["max_rss"] for r in runs)
        base, largest = results["import"]["max_rss"], TENSOR_MB * 2**20
        print(f"\ncheckpoint {size / 2**30:.2f} GiB, largest tensor {largest / 2**20:.0f} MiB, "
              f"constant (python+torch+llmfix) {base / 2**20:.0f} MiB")
        print(f"{'mode':8s} {'seconds':>8s} {'GB/s':>6s} {'peak RSS MiB':>13s} {'above constant':>15s}")
        for mode, r in results.items():
            rate = size / r["seconds"] / 1e9 if mode != "import" else float("nan")
            print(f"{mode:8s} {r['seconds']:8.2f} {rate:6.2f} {r['max_rss'] / 2**20:13.0f} "
                  f"{(r['max_rss'] - base) / 2**20:15.0f}")
        probe, plain, touch = results["probe"], results["plain"], results["touch"]
        over = probe["max_rss"] - base
        ratio = plain["seconds"] / probe["seconds"]
        print(f"\nprobe peak RSS above the constant: {over / 2**20:.0f} MiB = {over / largest:.2f} x largest tensor "
              f"(budget: largest tensor + a constant) -> {'OK' if over <= 2 * largest else 'OVER'}")
        print(f"probe throughput: {ratio:.0%} of plain read (budget >= 50 %) -> {'OK' if ratio >= 0.5 else 'UNDER'}; "
              f"{touch['seconds'] / probe['seconds']:.0%} of touching every page through mmap")
        return 0 if over <= 2 * largest and ratio >= 0.5 else 1
    finally:
        if not args.keep:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
