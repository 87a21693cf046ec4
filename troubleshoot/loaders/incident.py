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
                    f"{', '.join(data.get('trips', []))}")


def read(folder: str | Path) -> dict:
    """incident.json of a bundle; ArtifactError (one line) when it is not a readable bundle."""
    path = Path(folder) / INCIDENT
    if path.stat().st_size > MAX_BYTES:
        raise ArtifactError(path, f"larger than {MAX_BYTES >> 20} MiB: not an llmfix incident file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ArtifactError(path, f"not valid JSON ({err})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ArtifactError(path, f"not an llmfix incident (expected \"schema\": \"{SCHEMA}\")")
    return data
