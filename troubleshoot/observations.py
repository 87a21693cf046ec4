"""What probes and users tell the engine: facts, findings and the artifacts they came from.

Facts are the only currency between probes, questions and rules (DESIGN.md). A probe returns an
``Observations`` bundle; the CLI merges the bundles of all probes and hands the facts to the engine.
This module is plain data: no torch, no click.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Artifact:
    """One path the user gave, and what a loader recognised it as (kind from DESIGN.md)."""

    path: str
    kind: str  # hf-checkpoint | megatron-checkpoint | state-dict | log | batch | ...
    detail: str = ""  # for people, e.g. "megatron text log", "3 safetensors shards"
    format: str = ""  # for probes, e.g. "megatron" (a log format name, loaders/logs/formats.py)

    def to_json(self) -> dict:
        out = {"path": self.path, "kind": self.kind}
        if self.detail:
            out["detail"] = self.detail
        if self.format:
            out["format"] = self.format
        return out


@dataclass(frozen=True)
class Fact:
    """A named value with its origin: ``Fact("data.mask.binary", False, "probe:batch")``."""

    name: str
    value: Any
    source: str = "user"  # user | probe:<family>
    note: str = ""  # where exactly, e.g. "batch.pt: attention_mask[3, 17] = 2"


@dataclass(frozen=True)
class Finding:
    """One line of a probe report: ``where  id  message``.

    ``id`` is a dotted finding id (``data.mask.non_binary``); ``value`` is the measured number or
    a small JSON-able structure behind the message.
    """

    id: str
    severity: str
    message: str
    where: str = ""
    value: Any = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding {self.id}: severity {self.severity!r} not in {SEVERITIES}")

    def to_json(self) -> dict:
        return {"id": self.id, "severity": self.severity, "message": self.message,
                "where": self.where, "value": _jsonable(self.value)}


@dataclass
class Timeline:
    """One training log as series over iterations, for renderers (the terminal timeline, --plot).

    Plain numbers only: the log probe fills it, ``report/timeline.py`` and ``report/plot.py`` draw it.
    Series are block summaries (one value per block of records, NaN where a block has none).
    """

    path: str
    records: int
    its: list[int]                   # last iteration of each block
    loss: list[float]                # median loss of each block
    loss_lo: list[float]
    loss_hi: list[float]
    grad_norm: list[float]
    loss_scale: list[float]          # lowest fp16 loss scale of each block
    lr: list[float]
    loss_scale_seen: bool = False    # the log reports a loss scale at all
    vals: list[tuple[int, float]] = field(default_factory=list)            # (iteration, eval loss)
    markers: list[tuple[int | None, str, str]] = field(default_factory=list)  # (iteration, symbol, label)
    window: tuple[int, int] | None = None    # the data window to skip around the main instability

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass
class Observations:
    """What one or more probes established. Later facts of the same name win (merge order)."""

    artifacts: list[Artifact] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    facts: dict[str, Fact] = field(default_factory=dict)
    # Plain data for renderers, keyed by probe family: {"logs": {"timelines": [Timeline, ...]}}
    attachments: dict[str, Any] = field(default_factory=dict)

    def fact(self, name: str, value: Any, source: str, note: str = "") -> None:
        self.facts[name] = Fact(name, value, source, note)

    def find(self, id: str, severity: str, message: str, where: str = "", value: Any = None) -> Finding:
        finding = Finding(id, severity, message, where, value)
        self.findings.append(finding)
        return finding

    def merge(self, other: "Observations") -> "Observations":
        self.artifacts.extend(other.artifacts)
        self.findings.extend(other.findings)
        self.facts.update(other.facts)
        self.attachments.update(other.attachments)
        return self

    @classmethod
    def combine(cls, parts: Iterable["Observations"]) -> "Observations":
        out = cls()
        for part in parts:
            out.merge(part)
        return out


def _jsonable(value: Any) -> Any:
    """Numbers, strings, lists and dicts pass; NaN/Inf become strings so JSON stays valid."""
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)
