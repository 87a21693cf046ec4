"""The inference engine: symptoms + facts -> ranked causes, open questions and fixes.

Pure Python over plain data (no torch, no click). Scoring is naive-Bayes with likelihood ratios
(docs/knowledge-format.md): a cause starts at its prior odds and every evidence item whose facts
are known multiplies the odds by ``lr`` (condition holds) or ``else_lr`` (it does not). The
posterior is then weighed by how sure llmfix is of the symptom itself (its ``weight``): the shown
score, the one causes are sorted by. ``RankedCause.explain()`` prints the product, so every
number can be recomputed by hand. Causes are scored independently: two bugs can both be present.

Statuses come from evidence, never from a prior alone: ``untested`` until some item applied a
factor other than 1, ``ruled-out`` only when factors below 1 took the score under RULED_OUT,
``likely`` only for a cause at LIKELY or above that leads its symptom's other causes (and its
``alternatives`` under other symptoms) by LIKELY_LEAD (LIKELY_LEAD_PRIOR over one still untested).

Question order: ask the unknown fact whose answer could move the causes most per unit of effort,
``sum_c weight(symptom) * P(c) * |ln lr - ln else_lr|`` over the evidence that reads it, divided by
``sqrt(cost)`` so that reading a config (cost 1) comes before rerunning training (cost 4) unless the
rerun separates the causes twice as well; cheaper checks first on ties; never a fact that is
already known, that the user could not answer, or that has no value (its ``defined_when`` fails).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .diagnosis import WORDS, Diagnosis, EvidenceLine, Question, RankedCause, RenderedFix, SymptomMatch
from .knowledge.expr import ExprError, Unknown, placeholder, render_template
from .knowledge.model import Cause, Check, KnowledgeBase, Symptom
from .observations import Fact, Observations

RULED_OUT, LIKELY = 0.05, 0.5
LIKELY_LEAD = 3.0  # a likely cause scores at least this many times any other cause of its symptom that
LIKELY_LEAD_PRIOR = 2.0  # evidence moved, and this many times one still untested (docs/calibration.md)
COUNTERS = 0.2  # a factor this low (or lower) is strong evidence against: it defeats a `confirms` item
MIN_QUESTION_VALUE = 0.02   # below this an answer would not visibly change the ranking
IMPLIES_SYMPTOM_LR = 2.0    # a probed fact with at least this ratio ...
IMPLIES_SYMPTOM_SCORE = 0.25  # ... that lifts a cause at least this high puts its symptom on the table
NAMES_CAUSE_LR = 5.0        # ... and one of at least this ratio, read from the text, names the cause: it weighs 1
MATCH_TEMPERATURE = 0.02    # weight of a matched symptom: exp(-(best match - its match) / this)
OBSERVED_LEAD = 0.03        # a symptom seen to happen counts as matching this much better (weight x0.22)
SETTINGS_SOURCE = "probe:setup"  # run settings describe the setup, not a problem: they never imply a symptom
AGNOSTIC_SYMPTOMS = 5       # a fact supporting causes of this many symptoms says how it broke, not what broke

Asker = Callable[[Question], Any]  # returns a value, None for "don't know"; raises EOFError to stop


@dataclass
class State:
    """What is known so far; answers and probe results both land in ``facts``."""

    kb: KnowledgeBase
    weights: dict[str, float]                      # symptom id -> weight in (0, 1]
    facts: dict[str, Fact] = field(default_factory=dict)
    unknown: set[str] = field(default_factory=set)  # answered "don't know"
    evidence_only: set[str] = field(default_factory=set)  # symptoms only probes point to: their
    # causes count only where evidence moved them (siblings at their prior would be guesses)
    fit: dict[str, float] = field(default_factory=dict)  # symptom id -> its score in the symptom table
    words: dict[str, Any] = field(default_factory=dict)  # cause id -> lexical.Overlap with the report

    def values(self) -> dict[str, Any]:
        return {name: fact.value for name, fact in self.facts.items()}


def score_cause(cause: Cause, facts: Mapping[str, Fact]) -> tuple[float, list[EvidenceLine], bool]:
    """Posterior probability of one cause, the factors behind it, and whether it is confirmed.

    A `confirms` item proves the cause only when no other item speaks strongly against it
    (a factor of COUNTERS or less): "trainable params: 0" confirms a LoRA with nothing trainable,
    unless the same report shows that count was taken at inference."""
    values = {name: f.value for name, f in facts.items()}
    odds = cause.prior / (1 - cause.prior)
    lines, confirming, countered = [], False, False
    for ev in cause.evidence:
        try:
            holds = bool(ev.when.evaluate(values))
        except (Unknown, ExprError):
            continue
        named = sorted(ev.when.facts & facts.keys())  # `a and b` may decide on either operand alone
        trust = min(facts[name].trust for name in named) if named else 1.0
        factor = (ev.lr if holds else ev.else_lr) ** trust  # weak evidence from text: a tempered ratio
        odds *= factor
        confirming |= holds and ev.confirms and trust >= 1
        countered |= factor <= COUNTERS
        for name in named:
            fact = facts[name]
            lines.append(EvidenceLine(name, fact.value, fact.source, factor, holds,
                                      ev.says if holds else "", ev.when.source, fact.span))
    return _probability(odds), lines, confirming and not countered


def applied_factors(lines: list[EvidenceLine]) -> list[float]:
    """One factor per evidence item that was decided (an item reading two facts has two lines)."""
    return list({line.condition: line.factor for line in lines}.values())


def status_of(prior: float, lines: list[EvidenceLine], confirmed: bool, posterior: float,
              weight: float = 1.0) -> str:
    """The status the evidence supports for a cause with this posterior, shown at weight × it.

    ``untested``: nothing moved it from its prior. ``ruled-out``: the factors below 1 are what put
    the posterior under RULED_OUT (with only the others it would be at or above it), so a small
    prior alone never rules a cause out, nor does a doubtful symptom. Otherwise ``likely`` when the
    score shown reaches LIKELY, else ``possible``."""
    if confirmed:
        return "confirmed"
    factors = [f for f in applied_factors([line for line in lines if line.fact != WORDS]) if f != 1]
    if not factors:
        return "untested"
    supported = prior / (1 - prior) * math.prod(f for f in factors if f > 1)
    if posterior < RULED_OUT <= _probability(supported):
        return "ruled-out"
    return "likely" if posterior * weight >= LIKELY else "possible"


def _probability(odds: float) -> float:
    return odds / (1 + odds)


def rank(state: State) -> list[RankedCause]:
    """Every cause of the weighted symptoms in the order of the score shown (weight × posterior).

    The weight is the symptom's, except for a cause the report's own words name (a holding item of
    ratio NAMES_CAUSE_LR or more read from the text, ``implying_causes``): that one weighs 1, since
    its symptom's weight would count its own evidence a second time (docs/knowledge-format.md,
    "Ranking across symptoms"). A probe's finding names none: a fault the user did not report
    does not push the reported symptom's causes down.

    A cause belongs to one symptom (its id starts with it), so it is scored once; and one fault
    is reported once (``_one_report_per_fault``). Words the report shares with a cause
    (``state.words``) multiply its odds after its status is set, and only while evidence has not
    decided it (confirmed or ruled out): they reorder, never decide."""
    ranked = []
    values = state.values()
    same = twins(state.kb)
    named = _named(state, same)
    for sid, symptom_weight in state.weights.items():
        for cause in state.kb.symptoms[sid].causes:
            posterior, lines, confirmed = score_cause(cause, state.facts)
            weight = 1.0 if cause.id in named else symptom_weight
            status = status_of(cause.prior, lines, confirmed, posterior, weight)
            if sid in state.evidence_only and status == "untested":
                continue
            if cause.id in state.words and status not in ("confirmed", "ruled-out"):
                posterior, lines = _with_words(posterior, lines, state.words[cause.id])
            ranked.append(RankedCause(
                cause.id, sid, cause.title, posterior * weight, status, cause.prior, lines,
                [_render_fix(state.kb, fid, values) for fid in cause.fixes if fid in state.kb.fixes],
                cause.sources, cause.summary, posterior, weight))
    ranked = _one_report_per_fault(ranked, same, state.weights, state.fit)
    ranked.sort(key=lambda c: (-c.score, c.status != "confirmed", c.id))
    return _contested_made_possible(ranked, alternatives(state.kb, same))


def _named(state: State, same: Mapping[str, set[str]]) -> set[str]:
    """Causes the report's words name (``implying_causes`` with ``said``), less those with a declared
    twin under a symptom that weighs more: that twin already lists the fault where the report is
    about it, and lifting the other would let a generic twin outrank that symptom's own, more
    specific causes ("trainable params: 0" in a LoRA run is the adapter, not a frozen model)."""
    named = implying_causes(state.kb, state.facts, NAMES_CAUSE_LR, said=True)
    weight = state.weights
    return {cid for cid in named
            if not any(weight.get(state.kb.causes[t].symptom, 0.0) > weight.get(state.kb.causes[cid].symptom, 0.0)
                       for t in same.get(cid, ()))}


def alternatives(kb: KnowledgeBase, same: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Causes of other symptoms that one condition confirms alike, and that are not declared one
    fault: "the previous release works" confirms the framework regression of every symptom, so
    the evidence that lifts one lifts all, and only the symptom weights tell them apart. ``same``
    is ``twins(kb)``."""
    by_condition: dict[str, set[str]] = {}
    for cause in kb.causes.values():
        for ev in cause.evidence:
            if ev.confirms:
                by_condition.setdefault(ev.when.source, set()).add(cause.id)
    out: dict[str, set[str]] = {}
    for ids in by_condition.values():
        for cid in ids:
            others = {i for i in ids if kb.causes[i].symptom != kb.causes[cid].symptom} - same.get(cid, set())
            if others:
                out.setdefault(cid, set()).update(others)
    return out


def _contested_made_possible(ranked: list[RankedCause], alternative: Mapping[str, set[str]]) -> list[RankedCause]:
    """``likely`` only for a cause that scores LIKELY_LEAD times every other cause of its symptom
    and every alternative of it (``alternatives``) that the evidence moved, and LIKELY_LEAD_PRIOR
    times one still at its prior. Causes of one symptom compete to explain the same failure: when
    two fit about equally well, the evidence has not told them apart, and calling either likely
    sends the user to fix the wrong one half the time; a rival the evidence also lifted is the
    stronger competitor. Causes of different symptoms can both be present (weights x100 also
    overflow fp16), so they do not contest each other, unless one condition confirms both: a
    version regression that may be the zero loss's or the NaN's is not known to be either.
    Confirmed causes keep their status."""
    for cause in ranked:
        if cause.status != "likely":
            continue
        rivals = [c for c in ranked if c is not cause and
                  (c.symptom == cause.symptom or c.id in alternative.get(cause.id, ()))]
        if any(cause.score < (LIKELY_LEAD_PRIOR if c.status == "untested" else LIKELY_LEAD) * c.score for c in rivals):
            cause.status = "possible"
    return ranked


def _with_words(posterior: float, lines: list[EvidenceLine], overlap) -> tuple[float, list[EvidenceLine]]:
    """The posterior with the shared words' factor applied, and the line that shows it."""
    line = EvidenceLine(WORDS, overlap.words, "text", overlap.factor, True,
                        "The report uses words of this cause's description.", "shared words",
                        " … ".join(overlap.words))  # the quoted words, as for every fact from text
    if posterior >= 1:
        return posterior, [*lines, line]
    return _probability(posterior / (1 - posterior) * overlap.factor), [*lines, line]


def twins(kb: KnowledgeBase) -> dict[str, set[str]]:
    """Causes of other symptoms that the knowledge declares the same fault (``same_fault``): an
    init std too large is one fault whether it shows as NaN, spikes or a bad start. Declared twins
    are each other's twins both ways, and a twin's twin is a twin. A shared confirming condition
    makes no twins: "pinning the previous release fixes it" confirms the framework regression of
    every symptom, and a regression that NaNs is not the bug that loops; a fault one measurement
    confirms under two symptoms (``data.mask.binary == false``) is declared like any other."""
    groups: dict[str, set[str]] = {cid: {cid} for cid in kb.causes}
    for cause in kb.causes.values():
        merged = set().union(*(groups[i] for i in {cause.id, *cause.same_fault} if i in kb.causes))
        for i in merged:
            groups[i] = merged
    return {cid: {i for i in group if kb.causes[i].symptom != kb.causes[cid].symptom}
            for cid, group in groups.items() if len(group) > 1}


def _one_report_per_fault(ranked: list[RankedCause], twin_ids: Mapping[str, set[str]],
                          weights: Mapping[str, float], fit: Mapping[str, float]) -> list[RankedCause]:
    """One entry per fault. Of twins, the one listed is the twin under the symptom that fits the
    report best (the symptom's weight, then how well it matched, then its own score; a cause named
    by its own evidence weighs 1 whatever its symptom weighs, which says nothing about what the
    report is about); it is ranked at the best score any twin reached (with that twin's status), so
    folding never loses the better-supported twin's evidence. Its ``same_fault`` names every
    declared twin, on the table or not, and only those."""
    by_id = {c.id: c for c in ranked}
    kept, folded = [], set()
    for cause in sorted(ranked, key=lambda c: (-weights[c.symptom], -fit.get(c.symptom, 0.0), -c.score, c.id)):
        if cause.id in folded:
            continue
        group = [by_id[i] for i in sorted(twin_ids.get(cause.id, ())) if i in by_id and i not in folded]
        best = max([cause, *group], key=lambda c: (c.score, c.status == "confirmed"))
        if best is not cause:
            cause.score, cause.status, cause.scored_as = best.score, best.status, best.id
        cause.same_fault = sorted(twin_ids.get(cause.id, ()))
        folded.update(c.id for c in group)
        kept.append(cause)
    return kept


def _shared_words(kb: KnowledgeBase, query: str, weights: Mapping[str, float],
                  facts: Mapping[str, Fact]) -> dict[str, Any]:
    """Words of the report shared with each candidate cause; the words a fact was read from
    ("learning_rate=2e-5") already count through that fact, so they are left out."""
    from .evidence.lexical import overlaps

    spans = {f.span for f in facts.values() if f.source == "text" and f.span}
    return overlaps(kb, _without(query, spans), [c.id for sid in weights for c in kb.symptoms[sid].causes])


def _without(text: str, spans: set[str]) -> str:
    """``text`` with every occurrence of every span blanked, found in the original text: spans
    overlap ("QLoRA" inside "QLoRA训练后把lora合并到原始fp16"), and removing one first must not
    hide the other (which one went first followed the set's order, so the result varied by run)."""
    blank = [False] * len(text)
    for span in spans:
        start = text.find(span)
        while start >= 0:
            blank[start:start + len(span)] = [True] * len(span)
            start = text.find(span, start + 1)
    return "".join(" " if gone else ch for ch, gone in zip(text, blank))


def _render_fix(kb: KnowledgeBase, fid: str, values: Mapping[str, Any]) -> RenderedFix:
    fix = kb.fixes[fid]
    steps, needs = [], set()
    for step in fix.steps:
        text, missing = render_template(step, values)
        steps.append(text)
        needs |= missing
    return RenderedFix(fix.id, fix.title, steps, fix.sources, sorted(needs),
                       [{"text": a.text, "sources": a.sources} for a in fix.did_not_work],
                       {name: placeholder(name) for name in sorted(needs)})


def open_questions(state: State) -> list[Question]:
    """Unknown facts worth asking, most informative first."""
    posteriors = {c.id: score_cause(c, state.facts)[0]
                  for sid in state.weights for c in state.kb.symptoms[sid].causes}
    known = set(state.facts) | state.unknown
    values = state.values()
    best: dict[str, Question] = {}
    for sid, weight in state.weights.items():
        symptom = state.kb.symptoms[sid]
        for check in symptom.checks:
            if check.fact in known or (check.after and check.after not in state.facts):
                continue
            if _undefined(state.kb.facts.get(check.fact), values):
                continue
            value = weight * _movement(state, check.fact, symptom.causes, posteriors, known)
            current = best.get(check.fact)
            if current is None or value > current.value:
                best[check.fact] = _question(state.kb, check, value)
    cost = {q.fact: min(c.cost for c in state.kb.checks_for(q.fact)) for q in best.values()}
    questions = [q for q in best.values() if q.value >= MIN_QUESTION_VALUE]
    questions.sort(key=lambda q: (-round(q.value / math.sqrt(cost[q.fact]), 3), cost[q.fact], q.fact))
    return questions


def _undefined(spec, values: Mapping[str, Any]) -> bool:
    """The known facts say this one has no value (``defined_when`` is false): asking is pointless."""
    return spec is not None and spec.defined_when is not None and spec.defined_when.holds(values) is False


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
    """Symptoms that probed facts point to: a cause lifted to ≥ 0.25 by a holding item of ratio ≥ 2
    (``implying_causes``), weighed by the best such cause's posterior."""
    implied: dict[str, float] = {}
    for cid, posterior in implying_causes(kb, facts).items():
        sid = kb.causes[cid].symptom
        implied[sid] = max(implied.get(sid, 0.0), posterior)
    return implied


def implying_causes(kb: KnowledgeBase, facts: Mapping[str, Fact], min_lr: float = IMPLIES_SYMPTOM_LR,
                    said: bool = False) -> dict[str, float]:
    """Causes that facts point to on their own: a holding item of ratio ≥ ``min_lr`` lifts the cause
    to ≥ 0.25 (ratio 2 implies a symptom; ratio NAMES_CAUSE_LR read from the report's own words,
    ``said``, names the cause in ``rank``).

    Healthy artifacts still publish facts (padding side, dtype, ...); weak ones must not turn a
    clean report into a list of possible problems, and neither run settings (``_is_setting``) nor
    facts common to many symptoms' causes (``_symptom_agnostic``) ever do."""
    values = {name: f.value for name, f in facts.items()}
    agnostic = _symptom_agnostic(kb)
    out: dict[str, float] = {}
    for cause in kb.causes.values():
        for ev in cause.evidence:
            if ev.lr < min_lr or not ev.when.holds(values):  # the cheap tests first: this runs per ranking
                continue
            telling = [n for n in ev.when.facts & facts.keys() if not _is_setting(kb, facts[n]) and n not in agnostic]
            if not telling or said and all(facts[n].source != "text" for n in telling):
                continue
            score = score_cause(cause, facts)[0]
            if score >= IMPLIES_SYMPTOM_SCORE:
                out[cause.id] = score
                break
    return out


def _symptom_agnostic(kb: KnowledgeBase) -> set[str]:
    """Facts that support causes of AGNOSTIC_SYMPTOMS symptoms or more. "Pinning the previous
    DeepSpeed fixes it" supports a framework regression under every symptom it can show as: it
    says how the run broke, not whether it NaNs, stalls or loops, so it puts no symptom on the table."""
    symptoms: dict[str, set[str]] = {}
    for cause in kb.causes.values():
        for ev in cause.evidence:
            if ev.lr >= IMPLIES_SYMPTOM_LR:
                for name in ev.when.facts:
                    symptoms.setdefault(name, set()).add(cause.symptom)
    return {name for name, ids in symptoms.items() if len(ids) >= AGNOSTIC_SYMPTOMS}


def _is_setting(kb: KnowledgeBase, fact: Fact) -> bool:
    """A run setting (read from a script or config, or a configurable value named in the text:
    "zero3", "bf16", "lr 1e-5") describes the setup, not a problem."""
    spec = kb.facts.get(fact.name)
    return fact.source == SETTINGS_SOURCE or (fact.source == "text" and bool(spec and spec.keys))


def observed(symptom: Symptom, values: Mapping[str, Any]) -> bool | None:
    """True when the facts show the symptom (``observed_when``), False when they contradict it
    (``contradicted_when``), None when they say neither."""
    if any(expr.holds(values) for expr in symptom.observed_when):
        return True
    if any(expr.holds(values) for expr in symptom.contradicted_when):
        return False
    return None


def symptom_table(kb: KnowledgeBase, matched: Mapping[str, float], facts: Mapping[str, Fact],
                  shown: Mapping[str, float] | None = None) -> list[SymptomMatch]:
    """Every symptom with evidence for it, best first: the user's words matched it, an artifact
    shows it, or probed facts lifted one of its causes. A symptom the artifacts contradict stays
    listed (as not observed, weight 0) only when the user named it, so they see why it is gone.

    Weights (docs/knowledge-format.md, "Ranking across symptoms"): 1 when an artifact shows it;
    a matched one ``exp(-(best match - match) / MATCH_TEMPERATURE)``, so a weaker second symptom's
    priors fall behind the best symptom's causes unless the two matched about equally (with a
    symptom observed, the best match counts OBSERVED_LEAD higher: x0.22 for the others); one that
    probed facts imply, the implied posterior (at least), so a fault the user did not report does
    not push the reported symptom's own causes down. ``shown`` are symptoms an artifact recorded
    directly (the live guard saw the NaN happen): observed whatever the facts say."""
    values = {name: f.value for name, f in facts.items()}
    implied = implied_symptoms(kb, facts)
    seen_by = {sid: True if sid in (shown or {}) else observed(symptom, values) for sid, symptom in kb.symptoms.items()}
    # What was seen to happen is what the report is about: beside it, a symptom only the words
    # suggest weighs as if it had matched OBSERVED_LEAD worse than the best match.
    top = max(matched.values(), default=0.0) + (OBSERVED_LEAD if any(seen_by.values()) else 0.0)
    table = []
    for sid, symptom in kb.symptoms.items():
        seen = seen_by[sid]
        match, lifted = matched.get(sid), implied.get(sid)
        if seen is False and match is None or not (match or lifted or seen):
            continue
        if seen is not None:
            weight = 1.0 if seen else 0.0
        else:
            weight = max(math.exp(-(top - match) / MATCH_TEMPERATURE) if match else 0.0, lifted or 0.0)
        score = 1.0 if seen else max(match or 0.0, lifted or 0.0)
        table.append(SymptomMatch(sid, symptom.title, score, match, lifted, seen, weight))
    # ties (two symptoms both seen in what was given): the one the words match better comes first
    table.sort(key=lambda s: (-s.weight, -s.score, -(s.match or 0.0), -(s.implied or 0.0), s.id))
    return table


def diagnose(kb: KnowledgeBase, matched: Mapping[str, float], observations: Observations | None = None,
             answers: Mapping[str, Fact] | None = None, asker: Asker | None = None,
             max_questions: int = 12, query: str | None = None) -> Diagnosis:
    """Run the whole loop: merge facts, ask while it helps, rank, and package a Diagnosis.

    ``matched`` maps the symptoms the user's words matched to their match scores (empty for a
    probe report); symptoms the artifacts show or imply join them (``symptom_table``).
    """
    observations = observations or Observations()
    facts = {**observations.facts, **(answers or {})}
    symptoms = [s for s in symptom_table(kb, matched, facts, observations.symptoms) if s.id in kb.symptoms]
    weights = {s.id: s.weight for s in symptoms if s.weight > 0}
    evidence_only = {s.id for s in symptoms if s.match is None and not s.observed}
    state = State(kb, weights, facts, evidence_only=evidence_only, fit={s.id: s.score for s in symptoms},
                  words=_shared_words(kb, query, weights, facts) if query else {})
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
    return Diagnosis(query, list(observations.artifacts), list(observations.findings), symptoms,
                     rank(state), open_questions(state), dict(observations.attachments))
