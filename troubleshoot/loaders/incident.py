"""Recognise an incident bundle written by the live guard (``troubleshoot.live``).

A bundle is a folder holding ``incident.json`` with ``"schema": "llmfix/incident-v1"``, the
offending batch (``batch*.safetensors``), the recent metrics (``metrics.jsonl``) and, once the
guard has diagnosed it, ``diagnosis.json``. The layout is described in docs/live-guard.md;
``probes/incident.py`` turns it into facts.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import ArtifactError
from ..files import read_json
from ..observations import Artifact

SCHEMA = "llmfix/incident-v1"
INCIDENT, METRICS, DIAGNOSIS = "incident.json", "metrics.jsonl", "diagnosis.json"
BATCH_GLOB = "batch*.safetensors"
MAX_BYTES = 16 * 1024 * 1024   # incident.json is small; anything larger is not ours


def sniff(path: Path) -> Artifact | None:
    """An Artifact of kind "incident" for a bundle folder (or its incident.json), else None."""
    path = Path(path)
    folder = path.parent if path.name == INCIDENT else path
    if not (folder / INCIDENT).is_file():
        return None
    data = read(folder)
    return Artifact(str(folder), "incident", f"llmfix incident at step {data.get('step')}: "
                    f"{', '.join(data.get('trips') or [])}")


def read(folder: str | Path) -> dict:
    """incident.json of a bundle; ArtifactError (one line) when it is not a readable bundle."""
    path = Path(folder) / INCIDENT
    data = read_json(path, MAX_BYTES)  # regular files only; too deep, too long or broken JSON is one line
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ArtifactError(path, f"not an llmfix incident (expected \"schema\": \"{SCHEMA}\")")
    _check(path, data, FIELDS)
    for name, shape in NESTED.items():
        for i, item in enumerate(_items(data.get(name))):
            _check(path, item, shape, f"{name}[{i}]." if isinstance(data.get(name), list) else f"{name}.")
    return data


# What the probe reads, with the JSON types the guard writes (null is always allowed: not measured).
# (type, item type of a list); a number is an int or a float, never a bool, or the text the guard
# writes for a non-finite one ("nan", "inf").
NUMBER = (int, float, str)
FIELDS = {"step": (int, None), "trips": (list, str), "values": (dict, None), "replay": (dict, None),
          "batches": (list, dict), "ranks": (dict, None), "nonfinite_weights": (list, str),
          "nonfinite_grads": (list, str), "exception": (str, None), "lr_jump": (bool, None),
          "lr_level": (NUMBER, None), "lr_peak": (NUMBER, None), "framework": (str, None),
          "precision": (str, None), "grad_clip": (NUMBER, None)}
NESTED = {"replay": {"ran": (bool, None), "reproduced": (bool, None), "loss": (NUMBER, None), "error": (str, None),
                     "error_module": (str, None), "first_module": (str, None), "first_class": (str, None),
                     "frames": (list, dict), "grads_nonfinite": (list, str), "follows_weights": (bool, None),
                     "previous_loss": (NUMBER, None), "why_not": (str, None)},
          "ranks": {"world": (int, None), "first": (list, int)},
          "batches": {"nonfinite_keys": (list, str)}}


def _items(value) -> list:
    return value if isinstance(value, list) else [value] if isinstance(value, dict) else []


def _is(value, kind) -> bool:
    return isinstance(value, kind) and (not isinstance(value, bool) or kind is bool)


def _check(path: Path, data: dict, shape: dict, where: str = "") -> None:
    """ArtifactError naming the first field whose value has a type the guard never writes."""
    for key, (kind, item) in shape.items():
        value = data.get(key)
        if value is None:
            continue
        bad = not _is(value, kind) or item is not None and not all(_is(v, item) for v in value)
        if bad:
            want = {list: "a list", dict: "an object", str: "text", bool: "true/false", int: "an integer"}.get(
                kind, "a number") + (f" of {item.__name__}" if item is not None else "")
            raise ArtifactError(path, f"{where}{key} is {json.dumps(value)[:40]}, expected {want}")
