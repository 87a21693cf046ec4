"""The worker of the two-process live-guard test (gloo on CPU): a DDP regression model where
rank 1 alone gets a NaN in its inputs at step ``at``. Kept apart from the test module so that
``torch.multiprocessing.spawn`` children import only torch and the guard."""
from __future__ import annotations

import gc
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from troubleshoot.live import Guard

STEPS = 40


def mse(model, batch):
    return F.mse_loss(model(batch["x"]), batch["y"])


def worker(rank: int, world: int, folder: str, at: int) -> None:
    torch.set_num_threads(1)
    out = Path(folder)
    dist.init_process_group("gloo", init_method=f"file://{out / 'store'}", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    guard = Guard(model, opt, policy="skip", out_dir=out / "incidents", loss_fn=mse)
    gen, target = torch.Generator().manual_seed(100 + rank), torch.randn(8, 1, generator=torch.Generator().manual_seed(7))
    steps = 0
    for step in range(1, STEPS + 1):
        x = torch.randn(16, 8, generator=gen)
        batch = {"x": x.clone(), "y": x @ target}
        if step == at and rank == 1:
            batch["x"][3, 2] = float("nan")
        with guard.watch(batch):
            loss = mse(model, batch)
            loss.backward()
            if guard.after_backward(loss):
                opt.step()
                steps += 1
            opt.zero_grad()
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    (out / f"rank{rank}.json").write_text(json.dumps({
        "incidents": [str(p) for p in guard.incidents], "steps": steps, "loss": float(loss),
        "finite": bool(torch.isfinite(params).all()), "params": params.sum().item()}))
    # Gloo can abort at interpreter exit ("terminate called without an active exception") when
    # DDP's reducer still holds the group and its threads meet static destructors (pytorch#179291):
    # drop every holder, tear the group down while both ranks are alive, and skip finalization.
    del guard, opt, model
    gc.collect()
    dist.barrier()  # neither rank tears gloo down while the other may still use the connection
    dist.destroy_process_group()
    os._exit(0)
