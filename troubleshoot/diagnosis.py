"""The Diagnosis: what the engine concluded, in the shape of the `llmfix/diagnosis-v1` JSON."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .contracts import SCHEMA
from .observations import Artifact, Finding, _jsonable

WORDS = "text.words"  # the evidence line of words a report shares with a cause (evidence/lexical.py):
# not a fact of the knowledge, so nothing asks it, and it never sets a status


@dataclass
class EvidenceLine:
    """One factor of a cause's score: the fact, its value, and the likelihood ratio it applied."""

    fact: str
    value: Any
    source: str
    factor: float
    holds: bool
    says: str = ""
    condition: str = ""
    span: str = ""  # the quoted words a fact from text was read from

    def to_json(self) -> dict:
        out = {"fact": self.fact, "value": _jsonable(self.value), "from": self.source,
               "factor": round(self.factor, 4), "holds": self.holds, "condition": self.condition,
               "says": self.says}
        if self.span:
            out["span"] = self.span
        return out


@dataclass
class RenderedFix:
    """A fix with its steps computed from the known facts, and the facts that would fill the rest."""

    id: str
    title: str
    steps: list[str]
    sources: list[str]
    needs: list[str] = field(default_factory=list)  # facts that would compute a number in a step
    did_not_work: list[dict] = field(default_factory=list)
    placeholders: dict[str, str] = field(default_factory=dict)  # fact -> '<NAME>' shown in the steps

    def to_json(self) -> dict:
        return {"id": self.id, "title": self.title, "steps": self.steps, "sources": self.sources,
                "needs": self.needs, "placeholders": self.placeholders, "did_not_work": self.did_not_work}


@dataclass
class RankedCause:
    """A cause as ranked for this report: its score, status, evidence lines and rendered fixes."""

    id: str
    symptom: str
    title: str
    score: float   # the score shown and sorted by: weight × posterior
    status: str  # confirmed | likely | possible | untested | ruled-out
    prior: float
    evidence: list[EvidenceLine] = field(default_factory=list)
    fixes: list[RenderedFix] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    summary: str = ""
    posterior: float = 0.0  # P(cause | its symptom, the evidence)
    weight: float = 1.0     # how sure llmfix is of the symptom (engine.symptom_table)
    same_fault: list[str] = field(default_factory=list)  # other symptoms' ids for this very fault
    scored_as: str = ""  # the same_fault twin whose (higher) score and status this entry shows

    def explain(self) -> str:
        """'prior 0.10 × 30 (data.mask.binary = False) → 0.77', so the score can be recomputed;
        a symptom weighed below 1 adds '× 0.37 (symptom weight) → 0.28'."""
        items: dict[str, list[EvidenceLine]] = {}  # one factor per evidence item, however many facts
        for e in self.evidence:
            items.setdefault(e.condition, []).append(e)
        parts = [f"prior {self.prior:.2f}"]
        for lines in items.values():
            if lines[0].factor != 1:
                facts = ", ".join(f"{e.fact} = {_short(e.value)}" + (f' from "{_short(e.span, 48)}"' if e.span else "")
                                  for e in lines)
                parts.append(f"× {lines[0].factor:g} ({facts})")
        if self.weight != 1:
            parts.append(f"→ {self.posterior:.2f} × {self.weight:.2f} (symptom weight)")
        if self.scored_as:
            parts.append(f"→ {self.posterior * self.weight:.2f}; as the same fault {self.scored_as}")
        return " ".join(parts) + f" → {self.score:.2f}"

    def to_json(self) -> dict:
        return {"id": self.id, "symptom": self.symptom, "title": self.title, "score": round(self.score, 4),
                "status": self.status, "prior": self.prior, "posterior": round(self.posterior, 4),
                "symptom_weight": round(self.weight, 4), "same_fault": self.same_fault,
                "scored_as": self.scored_as or None, "why": self.explain(),
                "evidence": [e.to_json() for e in self.evidence],
                "fixes": [f.to_json() for f in self.fixes], "sources": self.sources}


@dataclass
class Question:
    """A check still open: the fact to ask about, the question, and how much its answer could move."""

    fact: str
    text: str
    type: str
    choices: list[str] = field(default_factory=list)
    how: str = ""
    probe: str = ""
    symptom: str = ""
    value: float = 0.0  # expected movement of the causes, the ordering key

    def to_json(self) -> dict:
        out = {"fact": self.fact, "text": self.text, "type": self.type}
        if self.choices:
            out["choices"] = self.choices
        if self.probe:
            out["probe"] = self.probe
        return out


@dataclass
class SymptomMatch:
    """Why a symptom is on the table: the user's words (``match``), probed facts that lifted one of
    its causes (``implied``), or an artifact that shows or contradicts it (``observed``)."""

    id: str
    title: str
    score: float                    # 1 when observed, else the larger of match and implied
    match: float | None = None      # matcher score of the user's words
    implied: float | None = None    # best posterior of a cause that probe evidence lifted
    observed: bool | None = None    # True shown by an artifact, False contradicted by one
    weight: float = 1.0             # what its causes' posteriors are multiplied by

    def to_json(self) -> dict:
        def r(x):
            return None if x is None else round(x, 4)
        return {"id": self.id, "title": self.title, "score": round(self.score, 4), "match": r(self.match),
                "implied": r(self.implied), "observed": self.observed, "weight": round(self.weight, 4)}


@dataclass
class Diagnosis:
    """One report: what was read, what was found, the symptoms, ranked causes and open questions."""

    query: str | None = None
    artifacts: list[Artifact] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    symptoms: list[SymptomMatch] = field(default_factory=list)
    causes: list[RankedCause] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    attachments: dict[str, Any] = field(default_factory=dict)
    weak_match: bool = False  # the words matched no symptom well: `symptoms` are only candidates

    @property
    def problem_found(self) -> bool:
        """Exit 1 when an error-severity finding or a confirmed cause exists (DESIGN.md)."""
        return (any(f.severity == "error" for f in self.findings)
                or any(c.status == "confirmed" for c in self.causes))

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "query": self.query,
                "artifacts": [a.to_json() for a in self.artifacts],
                "findings": [f.to_json() for f in self.findings],
                "symptoms": [s.to_json() for s in self.symptoms],
                "causes": [c.to_json() for c in self.causes],
                "questions": [q.to_json() for q in self.questions], "weak_match": self.weak_match}


def _short(value: Any, limit: int = 24) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
