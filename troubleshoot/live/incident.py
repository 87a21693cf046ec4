"""What happens when the guard trips: keep the evidence, replay the step, diagnose, write it down.

Every rank replays its own micro-batch locally (the unwrapped module, ``autograd.grad``: no
collective runs) and saves it as ``batch-rank<r>.safetensors``; one ``all_gather_object`` brings
the per-rank outcomes to rank 0, which alone writes the shared files (incident.json,
metrics.jsonl, diagnosis.json). All of this runs only at an incident, never on a healthy step.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from . import bundle, signals
from .diagnose import diagnose_bundle, save_diagnosis, summary
from .judge import GRAD, LOSS, TARGET, StepValues
from .replay import (
    Replay,
    follows_weights,
    forward_loss,
    judge_replay,
    nonfinite_names,
    replay,
)

log = logging.getLogger("llmfix.live")
SHOW = 20   # parameter names kept in incident.json


def record_incident(guard, trips: list[str], values: StepValues, error: BaseException | None,
                    local_only: bool) -> Path:
    """Write the bundle of this step; return its folder (on every rank)."""
    rank, world = signals.rank_and_world()
    folder = guard.out_dir / str(guard.step)
    folder.mkdir(parents=True, exist_ok=True)
    module = unwrap(guard.model)
    index, batch = _offending(guard._batches, guard._losses)
    rep = _replay(guard, module, batch, trips, values)
    named = list(module.named_parameters())
    info = {"rank": rank,
            "flags": values.rank_flags[rank] if values.rank_flags else None,
            "replay": rep.to_json(),
            "nonfinite_grads": nonfinite_names([n for n, _ in named], [p.grad for _, p in named])[:SHOW],
            "nonfinite_weights": nonfinite_names([n for n, _ in named], [p for _, p in named])[:SHOW],
            "batch": (bundle.save_batch(folder, bundle.batch_file(rank, 1 if local_only else world), batch,
                                        _batch_meta(module)) | {"micro_batch": index})
            if batch is not None else None}
    infos = [info] if local_only else signals.gather(info)
    if rank != 0 and not local_only:
        return folder
    record = _record(guard, trips, values, error, infos, world)
    bundle.write_json(folder / "incident.json", record)
    bundle.write_metrics(folder, list(guard.judge.window))
    diag = None
    try:
        diag = diagnose_bundle(folder)
        save_diagnosis(folder, diag)
        guard.diagnoses.append(diag)
    except Exception as err:  # the bundle is the evidence; a failed diagnosis must not lose it
        log.warning("llmfix: diagnosing %s failed: %s: %s", folder, type(err).__name__, err)
    log.warning(summary(guard.step, trips, record, diag, folder))
    return folder


def unwrap(model):
    """The local module of a DDP / DataParallel wrapper (replayed without its collectives)."""
    from torch.nn.parallel import DataParallel, DistributedDataParallel

    return model.module if isinstance(model, (DataParallel, DistributedDataParallel)) else model


def _offending(batches: list, losses: list) -> tuple[int, Any]:
    """The micro-batch to keep: the first with a non-finite loss, else the largest loss, else
    the last one begun (the one that raised)."""
    if not batches:
        return 0, None
    if len(batches) == len(losses) > 1:
        values = [float(x.detach()) if hasattr(x, "detach") else float(x) for x in losses]
        bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
        i = bad[0] if bad else max(range(len(values)), key=values.__getitem__)
        return i, batches[i]
    return len(batches) - 1, batches[-1]


def _replay(guard, module, batch, trips: list[str], values: StepValues) -> Replay:
    if not guard.do_replay:
        return Replay(why_not="replay=False")
    if batch is None:
        return Replay(why_not="no batch was given to the guard")
    if any("FullyShardedDataParallel" in type(m).__name__ for m in (guard.model, module)):
        return Replay(why_not="sharded parameters (FSDP): a local replay would need every rank")
    spike_only = not any(t in trips for t in ("nonfinite-loss", "nonfinite-grad", "exception"))
    try:
        rep = replay(module, batch, guard.loss_fn, guard._rng, guard.context,
                     values.loss_scale if values.loss_scale else None, backward=not spike_only)
        if "loss-spike" in trips and guard._previous is not None and len(guard.judge.window) >= 2:
            then = guard.judge.window[-2].get("loss")
            if isinstance(then, float):
                rep.previous_loss = forward_loss(module, guard._previous, guard.loss_fn, None, guard.context)
                rep.follows_weights = follows_weights(then, rep.previous_loss, values.loss)
    except Exception as err:  # a replay that cannot run says why; it never breaks the run
        return Replay(why_not=f"{type(err).__name__}: {err}"[:200])
    rep.reproduced = judge_replay(rep, trips, values.loss)
    return rep


def _batch_meta(module) -> dict:
    """vocab_size (rows of the input embedding) and special ids, for the batch probe's checks."""
    meta: dict[str, Any] = {}
    emb = getattr(module, "get_input_embeddings", None)
    try:
        weight = emb().weight if emb else None
        meta["vocab_size"] = int(weight.shape[0]) if weight is not None else None
    except (AttributeError, NotImplementedError, TypeError):
        pass
    config = getattr(module, "config", None)
    for key in ("pad_token_id",):  # EOS checks of a single random batch would only be noise here
        value = getattr(config, key, None)
        if isinstance(value, int):
            meta[key] = value
    return meta


def _record(guard, trips, values: StepValues, error, infos: list[dict], world: int) -> dict:
    flags = values.rank_flags
    ranks = {"world": world,
             "nonfinite_loss": [r for r, f in enumerate(flags) if f & LOSS],
             "nonfinite_grad": [r for r, f in enumerate(flags) if f & GRAD],
             "no_target": [r for r, f in enumerate(flags) if f & TARGET]}
    ranks["first"] = ranks["nonfinite_loss"] or ranks["nonfinite_grad"] or ranks["no_target"]
    main = next((i for i in infos if i["rank"] in ranks["first"]), infos[0])
    replays = [i["replay"] for i in infos]
    reproduced = [r["reproduced"] for r in replays if r.get("reproduced") is not None]
    rep = dict(main["replay"], reproduced=any(reproduced) if reproduced else None,
               rank=main["rank"], per_rank=replays if len(infos) > 1 else None)
    return {"schema": "llmfix/incident-v1", "step": guard.step, "trips": trips, "policy": guard.policy,
            "framework": guard.framework, "precision": guard.precision, "grad_clip": guard.grad_clip,
            "values": values.record(), "lr_peak": guard.judge.lr_peak or None, "lr_level": guard.judge.lr_level(),
            "lr_jump": guard.judge.lr_jump(), "scaler": _scaler_state(guard),
            "exception": f"{type(error).__name__}: {error}"[:300] if error is not None else None,
            "ranks": ranks, "replay": rep,
            "nonfinite_grads": main["nonfinite_grads"], "nonfinite_weights": main["nonfinite_weights"],
            "batches": [i["batch"] for i in infos if i["batch"]],
            "config": _config(guard)}


def _scaler_state(guard) -> dict | None:
    scaler = guard.scaler
    if scaler is None or not getattr(scaler, "is_enabled", lambda: True)():
        return None
    state = scaler.state_dict() if hasattr(scaler, "state_dict") else {}
    return {k: v for k, v in state.items() if isinstance(v, (int, float, bool))}


def _config(guard) -> dict:
    out = dict(guard.config)
    model_config = getattr(unwrap(guard.model), "config", None)
    if hasattr(model_config, "to_dict"):
        out.setdefault("model", model_config.to_dict())
    return out
