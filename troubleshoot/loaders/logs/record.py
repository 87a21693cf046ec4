"""The one record type every log format is read into, and the metric names of dict-shaped logs.

Text, JSONL, CSV, ``trainer_state.json`` and TensorBoard readers all yield ``Record``; the dict-
shaped ones (and the dicts the HF Trainer prints) share one key vocabulary, so
``train/learning_rate``, ``lr`` and ``learning_rate`` all land in ``Record.lr``. Numbers are
parsed forgivingly: ``'nan'`` / ``'inf'`` are values, unreadable text is None, never an exception.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class Record:
    """One event of a log. ``line`` is the 1-based line (text) or entry number (JSON/CSV/TB)."""

    kind: str                  # train | val | save | load | overflow | dsstep | error | gap | meta | phase
    iteration: int | None = None
    loss: float | None = None
    lr: float | None = None
    grad_norm: float | None = None
    loss_scale: float | None = None
    skipped: int | None = None     # train: skipped in this interval; dsstep: cumulative
    nan_count: int | None = None
    val_loss: float | None = None
    seconds: float | None = None   # time per iteration
    batch: float | None = None     # global batch size (to normalise the time)
    line: int = 0
    text: str = ""
    prefs: dict | None = None      # preference / RL metrics by canonical name (PREFERENCE_KEYS)


def to_float(text: str | float | None) -> float | None:
    """float() that also reads 'nan' / 'inf' and never raises (an int of 400 digits is inf)."""
    if text is None:
        return None
    try:
        return float(text)
    except OverflowError:  # an int of 400 digits
        return math.inf if text > 0 else -math.inf
    except ValueError:
        t = text.strip().strip("'\"").lower()
        if t in ("nan", "-nan", "inf", "-inf", "infinity", "-infinity"):
            return float(t.replace("infinity", "inf"))
        return None


def to_int(text: str | float | None) -> int | None:
    """``to_float`` as an int; None for a non-finite value."""
    v = to_float(text)
    return int(v) if v is not None and math.isfinite(v) else None


# ---------------------------------------------------------------------------------------------
# dict-shaped formats share one key vocabulary

_SLOTS = {
    "step": "step", "global_step": "step", "iteration": "step", "iter": "step", "_step": "step",
    "it": "step", "trainer/global_step": "step", "train/global_step": "step", "steps": "step",
    "current_steps": "step",  # LLaMA-Factory trainer_log.jsonl
    "loss": "loss", "train_loss": "loss", "train/loss": "loss", "lm_loss": "loss",
    "training_loss": "loss", "train/lm_loss": "loss", "loss/train": "loss", "train/loss_step": "loss",
    "eval_loss": "val_loss", "val_loss": "val_loss", "validation_loss": "val_loss",
    "eval/loss": "val_loss", "val/loss": "val_loss", "valid_loss": "val_loss",
    "loss/val": "val_loss", "lm_loss_validation": "val_loss", "valid/loss": "val_loss",
    "lr": "lr", "learning_rate": "lr", "train/lr": "lr", "train/learning_rate": "lr",
    "grad_norm": "grad_norm", "gradient_norm": "grad_norm", "train/grad_norm": "grad_norm",
    "total_norm": "grad_norm", "gnorm": "grad_norm", "grad_norm/total": "grad_norm",
    "loss_scale": "loss_scale", "train/loss_scale": "loss_scale", "grad_scale": "loss_scale",
    "skipped_iterations": "skipped", "number_of_skipped_iterations": "skipped",
    "nan_iterations": "nan_count", "number_of_nan_iterations": "nan_count",
}


def metric_slot(key: str) -> str | None:
    """'train/learning_rate' -> 'lr', 'lm loss' -> 'loss', 'eval_loss' -> 'val_loss', else None."""
    k = key.strip()
    if " - " in k:  # a W&B CSV export names its columns "<run name> - train/loss" (and __MIN / __MAX)
        k = k.rsplit(" - ", 1)[1]
        if k.endswith(("__MIN", "__MAX")):
            return None
    k = k.lower().replace(" ", "_").replace("-", "_")
    return _SLOTS.get(k)


# Preference and RL trainers (TRL and the frameworks built on it) log these; canonical name -> keys
# (lower case, after a 'train/' prefix is cut). probes/logs/preference.py reads what they show.
PREFERENCE_KEYS = {
    "chosen": ("rewards/chosen",),
    "rejected": ("rewards/rejected",),
    "margins": ("rewards/margins",),
    "accuracies": ("rewards/accuracies",),
    "logps_chosen": ("logps/chosen",),
    "logps_rejected": ("logps/rejected",),
    "kl": ("kl", "objective/kl", "ppo/mean_kl"),
    "clipfrac": ("clip_ratio", "clip_ratio/region_mean", "policy/clipfrac_avg", "ppo/policy/clipfrac", "clipfrac"),
    "length": ("completions/mean_length", "completion_length", "response_length", "ppo/mean_response_length"),
}
_PREFERENCE_SLOT = {key: name for name, keys in PREFERENCE_KEYS.items() for key in keys}


def preference_metrics(d: dict) -> dict[str, float]:
    """The preference metrics of one logged dict by canonical name; evaluation entries left out."""
    out: dict[str, float] = {}
    for key, value in d.items():
        k = str(key).strip().lower()
        if k.startswith(("eval_", "eval/", "test_")):
            continue
        name = _PREFERENCE_SLOT.get(k.removeprefix("train/"))
        if name and name not in out:
            v = to_float(value) if isinstance(value, str) else value
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[name] = float(v)
    return out


def record_from_dict(d: dict, line: int, counter: int) -> Record | None:
    """A train or val Record from one metrics dict; None when it holds neither loss nor a
    preference metric."""
    vals: dict[str, object] = {}
    for k, v in d.items():
        slot = metric_slot(str(k))
        if slot and slot not in vals:
            vals[slot] = v
    prefs = preference_metrics(d) or None
    if "train_runtime" in d or ("loss" not in vals and "val_loss" not in vals and not prefs):
        return None  # end-of-training summaries repeat an average loss
    step = to_int(vals["step"]) if "step" in vals else counter

    def f(slot: str) -> float | None:
        v = vals.get(slot)
        return to_float(v) if isinstance(v, (int, float, str)) and not isinstance(v, bool) else None

    if not prefs and all(f(slot) is None for slot in ("loss", "val_loss", "lr", "grad_norm", "loss_scale")):
        return None  # {"step": "x", "loss": "y"}: nothing to read (and no iteration to take)
    if "loss" not in vals and not prefs:
        return Record("val", step, val_loss=f("val_loss"), line=line)
    skipped, nan_count = f("skipped"), f("nan_count")
    return Record("train", step, f("loss"), f("lr"), f("grad_norm"), f("loss_scale"),
                  int(skipped) if skipped is not None and math.isfinite(skipped) else None,
                  int(nan_count) if nan_count is not None and math.isfinite(nan_count) else None,
                  f("val_loss"), line=line, prefs=prefs)
