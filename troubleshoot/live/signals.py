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
    """Supervised tokens of the emptiest micro-batch: labels != -100 (HF), else the ``loss_mask``
    sum (Megatron-style batches); None when a batch carries neither."""
    import torch

    counts = []
    for batch in batches:
        labels = batch.get("labels") if isinstance(batch, dict) else None
        loss_mask = batch.get("loss_mask") if isinstance(batch, dict) else None
        if isinstance(labels, torch.Tensor) and not labels.is_floating_point():
            counts.append((labels != IGNORE_INDEX).sum())
        elif isinstance(loss_mask, torch.Tensor):
            counts.append((loss_mask != 0).sum())
    if len(counts) > 1:
        return torch.stack(counts).min()
    return counts[0] if counts else None


def read_step(loss: Any, norm: Any, count: Any, scale: Any) -> tuple[float, float | None, float | None,
                                                                      float | None, list[int]]:
    """(loss, grad norm, targets, loss scale, per-rank flags) after one all-reduce and one sync.

    Each argument is a tensor, a number or None. Under torch.distributed the loss and grad norm
    are means over ranks (NaN when any rank's is) and each rank's own flags say which rank saw
    what; without it only the tensors among the four are read, in one stacked copy.
    """
    import torch

    values = [loss, norm, count, scale]
    dist = _dist()
    if dist is None:
        slots = [i for i, v in enumerate(values) if isinstance(v, torch.Tensor)]
        if slots:
            read = torch.stack([_scalar(values[i]) for i in slots]).tolist()
            for i, v in zip(slots, read):
                values[i] = v
        return (float(values[0]), *(None if v is None else float(v) for v in values[1:]), [])
    return _agreed(values, dist)


def _agreed(values: list, dist) -> tuple:
    """The distributed read: one vector (four values + one flag slot per rank), one all-reduce."""
    import torch

    loss = values[0]
    device = loss.device if isinstance(loss, torch.Tensor) else "cpu"
    world, rank = dist.get_world_size(), dist.get_rank()
    zero = torch.zeros((), device=device)
    head = torch.stack([as_tensor(v, device) if v is not None else zero for v in values])
    own = ((~torch.isfinite(head[0])).float() + 2 * (~torch.isfinite(head[1])).float()
           + (4 * (head[2] == 0).float() if values[2] is not None else zero))
    slots = torch.zeros(world, device=device)
    slots[rank] = own
    vec = torch.cat([torch.nan_to_num(head, nan=0.0, posinf=0.0, neginf=0.0), slots])
    dist.all_reduce(vec)
    out = vec.tolist()
    flags = [int(f) for f in out[4:]]
    mean_loss = out[0] / world if not any(f & 1 for f in flags) else float("nan")
    mean_norm = out[1] / world if not any(f & 2 for f in flags) else float("nan")
    return (mean_loss, mean_norm if values[1] is not None else None, out[2] if values[2] is not None else None,
            out[3] if values[3] is not None else None, flags)


def _scalar(t):
    """A 0-dim float32 view of a one-element tensor (no copy when it already is one)."""
    import torch

    t = t.detach()
    return t if t.dtype == torch.float32 and t.dim() == 0 else t.reshape(()).float()


def as_tensor(value: Any, device) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().reshape(()).to(device=device, dtype=torch.float32)
    return torch.tensor(float(value), dtype=torch.float32, device=device)


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
