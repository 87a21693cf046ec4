"""The inference engine: symptoms + facts -> ranked causes, open questions and fixes.

Pure Python over plain data (no torch, no click). Scoring is naive-Bayes with likelihood ratios
(docs/knowledge-format.md): a cause starts at its prior odds and every evidence item whose facts
are known multiplies the odds by ``lr`` (condition holds) or ``else_lr`` (it does not). The score
is the posterior probability and ``RankedCause.explain()`` prints the product, so every number can
be recomputed by hand. Causes are scored independently: two bugs can both be present.

Question order: ask the unknown fact whose answer could move the causes most per unit of effort,
``sum_c weight(symptom) * P(c) * |ln lr - ln else_lr|`` over the evidence that reads it, divided by
``sqrt(cost)`` so that reading a config (cost 1) comes before rerunning training (cost 4) unless the
rerun separates the causes twice as well; cheaper checks first on ties; never a fact that is
already known or that the user could not answer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .diagnosis import (Diagnosis, EvidenceLine, Question, RankedCause, RenderedFix,
                        SymptomMatch)
from .knowledge.expr import ExprError, Unknown, render_template
from .knowledge.model import Cause, Check, KnowledgeBase
from .observations import Fact, Observations

RULED_OUT, LIKELY = 0.05, 0.5
MIN_QUESTION_VALUE = 0.02   # below this an answer would not visibly change the ranking
IMPLIES_SYMPTOM_LR = 2.0    # a probed fact with at least this ratio ...
IMPLIES_SYMPTOM_SCORE = 0.25  # ... that lifts a cause at least this high puts its symptom on the table
SETTINGS_SOURCE = "probe:setup"  # run settings describe the setup, not a problem: they never imply a symptom

Asker = Callable[[Question], Any]  # returns a value, None for "don't know"; raises EOFError to stop


@dataclass
class State:
    """What is known so far; answers and probe results both land in ``facts``."""

    kb: KnowledgeBase
    weights: dict[str, float]                      # symptom id -> weight in (0, 1]
    facts: dict[str, Fact] = field(default_factory=dict)
    unknown: set[str] = field(default_factory=set)  # answered "don't know"

    def values(self) -> dict[str, Any]:
        return {name: fact.value for name, fact in self.facts.items()}


def score_cause(cause: Cause, facts: Mapping[str, Fact]) -> tuple[float, list[EvidenceLine], bool]:
    """Posterior probability of one cause, the factors behind it, and whether it is confirmed."""
    values = {name: f.value for name, f in facts.items()}
    odds = cause.prior / (1 - cause.prior)
    lines, confirmed = [], False
    for ev in cause.evidence:
        try:
            holds = bool(ev.when.evaluate(values))
        except (Unknown, ExprError):
            continue
        named = sorted(ev.when.facts & facts.keys())  # `a and b` may decide on `a` alone
        trust = min(facts[name].trust for name in named) if named else 1.0
        factor = (ev.lr if holds else ev.else_lr) ** trust  # weak evidence from text: a tempered ratio
        odds *= factor
        confirmed |= holds and ev.confirms and trust >= 1
        for name in named:
            fact = facts[name]
            lines.append(EvidenceLine(name, fact.value, fact.source, factor, holds,
                                      ev.says if holds else "", ev.when.source, fact.span))
    return odds / (1 + odds), lines, confirmed


def status_of(score: float, confirmed: bool) -> str:
    if confirmed:
        return "confirmed"
    if score < RULED_OUT:
        return "ruled-out"
    return "likely" if score >= LIKELY else "possible"


def rank(state: State) -> list[RankedCause]:
    """Every cause of the weighted symptoms, best first (score × symptom weight)."""
    ranked = []
    values = state.values()
    for sid, weight in state.weights.items():
        for cause in state.kb.symptoms[sid].causes:
            score, lines, confirmed = score_cause(cause, state.facts)
            ranked.append((score * weight, RankedCause(
                cause.id, sid, cause.title, score, status_of(score, confirmed), cause.prior, lines,
                [_render_fix(state.kb, fid, values) for fid in cause.fixes if fid in state.kb.fixes],
                cause.sources, cause.summary)))
    ranked.sort(key=lambda pair: (-(pair[1].status == "confirmed"), -pair[0], pair[1].id))
    return [cause for _, cause in ranked]


def _render_fix(kb: KnowledgeBase, fid: str, values: Mapping[str, Any]) -> RenderedFix:
    fix = kb.fixes[fid]
    steps, needs = [], set()
    for step in fix.steps:
        text, missing = render_template(step, values)
        steps.append(text)
        needs |= missing
    return RenderedFix(fix.id, fix.title, steps, fix.sources, sorted(needs),
                       [{"text": a.text, "sources": a.sources} for a in fix.did_not_work])


def open_questions(state: State) -> list[Question]:
    """Unknown facts worth asking, most informative first."""
    posteriors = {c.id: score_cause(c, state.facts)[0]
                  for sid in state.weights for c in state.kb.symptoms[sid].causes}
    known = set(state.facts) | state.unknown
    best: dict[str, Question] = {}
    for sid, weight in state.weights.items():
        symptom = state.kb.symptoms[sid]
        for check in symptom.checks:
            if check.fact in known or (check.after and check.after not in state.facts):
                continue
            value = weight * _movement(state, check.fact, symptom.causes, posteriors, known)
            current = best.get(check.fact)
            if current is None or value > current.value:
                best[check.fact] = _question(state.kb, check, value)
    cost = {q.fact: min(c.cost for c in state.kb.checks_for(q.fact)) for q in best.values()}
    questions = [q for q in best.values() if q.value >= MIN_QUESTION_VALUE]
    questions.sort(key=lambda q: (-round(q.value / math.sqrt(cost[q.fact]), 3), cost[q.fact], q.fact))
    return questions


def _movement(state: State, fact: str, causes: list[Cause], posteriors: Mapping[str, float],
              known: set[str]) -> float:
    total = 0.0
    for cause in causes:
        for ev in cause.evidence:
            if fact in ev.when.facts and ev.when.facts - {fact} <= known:
                total += posteriors[cause.id] * abs(math.log(ev.lr) - math.log(ev.else_lr))
    return total


def _question(kb: KnowledgeBase, check: Check, value: float) -> Question:
    spec = kb.facts[check.fact]
    return Question(check.fact, check.ask, spec.type, spec.choices, check.how, check.probe, check.symptom, value)


def implied_symptoms(kb: KnowledgeBase, facts: Mapping[str, Fact]) -> dict[str, float]:
    """Symptoms that probed facts point to: a cause lifted to ≥ 0.25 by a holding item of ratio ≥ 2.

    Healthy artifacts still publish facts (padding side, dtype, ...); weak ones must not turn a
    clean report into a list of possible problems."""
    values = {name: f.value for name, f in facts.items()}
    implied: dict[str, float] = {}
    for cause in kb.causes.values():
        for ev in cause.evidence:
            if ev.lr < IMPLIES_SYMPTOM_LR or all(facts[n].source == SETTINGS_SOURCE for n in ev.when.facts & facts.keys()):
                continue
            try:
                if ev.when.evaluate(values):
                    score = score_cause(cause, facts)[0]
                    if score >= IMPLIES_SYMPTOM_SCORE:
                        implied[cause.symptom] = max(implied.get(cause.symptom, 0.0), score)
            except (Unknown, ExprError):
                continue
    return implied


def diagnose(kb: KnowledgeBase, weights: Mapping[str, float], observations: Observations | None = None,
             answers: Mapping[str, Fact] | None = None, asker: Asker | None = None,
             max_questions: int = 12, query: str | None = None) -> Diagnosis:
    """Run the whole loop: merge facts, ask while it helps, rank, and package a Diagnosis.

    ``weights`` are the matched symptoms (ask); probe-implied symptoms are added with their score.
    """
    observations = observations or Observations()
    facts = {**observations.facts, **(answers or {})}
    combined = dict(weights)
    for sid, score in implied_symptoms(kb, facts).items():
        combined[sid] = max(combined.get(sid, 0.0), score)
    state = State(kb, {sid: w for sid, w in combined.items() if sid in kb.symptoms and w > 0}, facts)
    asked = 0
    while asker is not None and asked < max_questions:
        questions = open_questions(state)
        if not questions or any(c.status == "confirmed" for c in rank(state)[:1]):
            break
        question = questions[0]
        try:
            value = asker(question)
        except EOFError:
            break
        asked += 1
        if value is None:
            state.unknown.add(question.fact)
        else:
            state.facts[question.fact] = Fact(question.fact, value, "user")
    symptoms = sorted((SymptomMatch(sid, kb.symptoms[sid].title, w) for sid, w in state.weights.items()),
                      key=lambda s: -s.score)
    return Diagnosis(query, list(observations.artifacts), list(observations.findings), symptoms,
                     rank(state), open_questions(state), dict(observations.attachments))
