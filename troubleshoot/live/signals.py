"""Read one step's numbers off the device with a single host sync, and agree on them across ranks.

Everything the judge needs is stacked into one small tensor on the loop's device — the loss, the
gradient norm (the loop's own when it clipped, else one fused norm over all gradients), the
supervised-token count of the emptiest micro-batch, the loss scale — plus, under
``torch.distributed``, one slot per rank with that rank's flags (1 loss, 2 grad non-finite, 4 no
target). One ``all_reduce`` makes the vector identical on every rank (sums: the slots of other
ranks are 0), so every rank takes the same decision; one ``.tolist()`` is the only host sync.
"""
from __future__ import annotations

from typing import Any

IGNORE_INDEX = -100


def grad_norm(params: list) -> Any:
    """The global L2 norm of the gradients as a 0-dim tensor (one fused pass, no host sync)."""
    import torch

    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.zeros(())
    return torch.nn.utils.get_total_norm(grads, 2.0, foreach=None)


def targets(batches: list[Any]) -> Any | None:
    """Supervised tokens of the emptiest micro-batch (labels != -100), or None without labels."""
    import torch

    counts = []
    for batch in batches:
        labels = batch.get("labels") if isinstance(batch, dict) else None
        if isinstance(labels, torch.Tensor) and not labels.is_floating_point():
            counts.append((labels != IGNORE_INDEX).sum())
    return torch.stack(counts).min() if counts else None


def as_tensor(value: Any, device) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().reshape(()).to(device=device, dtype=torch.float32)
    return torch.tensor(float(value), dtype=torch.float32, device=device)


def read_step(loss: Any, norm: Any, count: Any, scale: Any) -> tuple[float, float | None, float | None,
                                                                      float | None, list[int]]:
    """(loss, grad norm, targets, loss scale, per-rank flags) after one all-reduce and one sync.

    ``loss`` is the step's loss (a tensor or float; NaN propagates), the others may be None.
    Under torch.distributed the loss is the mean over ranks and the counts the minimum's proxy:
    each rank's own flags say which rank had no target.
    """
    import torch

    device = loss.device if isinstance(loss, torch.Tensor) else "cpu"
    dist = _dist()
    world, rank = (dist.get_world_size(), dist.get_rank()) if dist else (1, 0)
    zero = torch.zeros((), device=device)
    values = [as_tensor(loss, device)] + [as_tensor(v, device) if v is not None else zero
                                          for v in (norm, count, scale)]
    head = torch.stack(values)
    if dist is None:
        out = head.tolist()
        flags = []
    else:
        own = ((~torch.isfinite(head[0])).float() + 2 * (~torch.isfinite(head[1])).float()
               + (4 * (head[2] == 0).float() if count is not None else zero))
        slots = torch.zeros(world, device=device)
        slots[rank] = own
        vec = torch.cat([torch.nan_to_num(head, nan=0.0, posinf=0.0, neginf=0.0), slots])
        dist.all_reduce(vec)
        out = vec.tolist()
        flags = [int(f) for f in out[4:]]
        out[0] = out[0] / world if not any(f & 1 for f in flags) else float("nan")
        out[1] = out[1] / world if not any(f & 2 for f in flags) else float("nan")
    return (out[0], out[1] if norm is not None else None, out[2] if count is not None else None,
            out[3] if scale is not None else None, flags)


def _dist():
    """torch.distributed when a process group is up, else None."""
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1 else None


def rank_and_world() -> tuple[int, int]:
    dist = _dist()
    return (dist.get_rank(), dist.get_world_size()) if dist else (0, 1)


def gather(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (one-off, at incident time only); ``[obj]`` outside distributed runs."""
    dist = _dist()
    if dist is None:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def barrier() -> None:
    dist = _dist()
    if dist is not None:
        dist.barrier()
