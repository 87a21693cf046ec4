"""The incident bundle: one folder per incident, readable later by ``llmfix probe FOLDER``.

    <out_dir>/<step>/
      incident.json       llmfix/incident-v1: step, why it tripped, values, LR, loss scale,
                          config, ranks, non-finite gradients and weights, the replay's outcome
      batch.safetensors   the offending micro-batch (one ``batch-rank<r>.safetensors`` per rank
                          under torch.distributed); ``vocab_size`` / pad / EOS ids in its metadata
      metrics.jsonl       the recent metrics window, one step per line (the log probe reads it)
      diagnosis.json      llmfix/diagnosis-v1, the same as ``llmfix probe <out_dir>/<step> --json``

Only tensors are saved (safetensors: nothing executable); other batch entries are listed by name.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..loaders.incident import METRICS
from ..observations import _jsonable


def batch_file(rank: int, world: int) -> str:
    return "batch.safetensors" if world == 1 else f"batch-rank{rank}.safetensors"


def tensors_of(batch: Any) -> tuple[dict, list[str]]:
    """(name -> tensor, names of entries that are not tensors) for a dict, tuple or list batch."""
    import torch

    items = batch.items() if isinstance(batch, dict) else (
        (f"input_{i}", v) for i, v in enumerate(batch if isinstance(batch, (tuple, list)) else [batch]))
    kept, other = {}, []
    for name, value in items:
        if isinstance(value, torch.Tensor):
            kept[str(name)] = value
        else:
            other.append(str(name))
    return kept, other


def save_batch(folder: Path, name: str, batch: Any, meta: dict) -> dict:
    """Write the batch as safetensors; return what incident.json says about it."""
    import torch
    from safetensors.torch import save_file

    tensors, other = tensors_of(batch)
    nonfinite = [k for k, t in tensors.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    cpu = {k: t.detach().to("cpu").clone() for k, t in tensors.items()}  # labels may share input_ids' storage
    save_file(cpu, str(folder / name), metadata={k: str(v) for k, v in meta.items() if v is not None})
    return {"file": name, "keys": sorted(cpu), "not_saved": other, "nonfinite_keys": nonfinite,
            "shapes": {k: list(t.shape) for k, t in cpu.items()}}


def write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(_jsonable(obj), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def write_metrics(folder: Path, window: list[dict]) -> None:
    lines = [json.dumps(_jsonable(rec)) for rec in window]
    (folder / METRICS).write_text("\n".join(lines) + "\n", encoding="utf-8")
