"""Diagnose a written bundle exactly as ``llmfix probe BUNDLE`` does, and say it in one line."""
from __future__ import annotations

import json
from pathlib import Path

from ..diagnosis import Diagnosis
from ..loaders.incident import DIAGNOSIS


def diagnose_bundle(folder: str | Path) -> Diagnosis:
    """The same loaders, probes and engine as the CLI's ``probe`` command, on the bundle folder."""
    from ..engine import diagnose
    from ..knowledge import load
    from ..loaders import detect
    from ..probes import ProbeContext, run_all

    observations = run_all(ProbeContext([detect(folder)]))
    return diagnose(load(), {}, observations)


def save_diagnosis(folder: Path, diag: Diagnosis) -> None:
    (folder / DIAGNOSIS).write_text(json.dumps(diag.to_json(), ensure_ascii=False, indent=1) + "\n",
                                    encoding="utf-8")


def summary(step: int, trips: list[str], incident: dict, diag: Diagnosis | None, folder: Path) -> str:
    """'llmfix: step 57 tripped (nonfinite-loss): deterministic, first NaN/Inf in transformer.drop
    (Dropout); top cause nan-loss.nonfinite-data (confirmed, 0.97); bundle runs/x/57'."""
    rep = incident.get("replay") or {}
    parts = [f"llmfix: step {step} tripped ({', '.join(trips)})"]
    if rep.get("reproduced") is not None:
        parts.append("deterministic (replays)" if rep["reproduced"] else "transient (does not replay)")
    if rep.get("first_module"):
        parts.append(f"first NaN/Inf in {rep['first_module']} ({rep.get('first_class') or '?'})")
    if rep.get("error_module"):
        parts.append(f"raised in {rep['error_module']}")
    if diag is not None and diag.causes:
        top = diag.causes[0]
        parts.append(f"top cause {top.id} ({top.status}, {top.score:.2f})")
    return "; ".join(parts) + f"; bundle {folder}"
