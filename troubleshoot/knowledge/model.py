"""The knowledge base as plain data: symptoms, checks, causes, evidence, fixes, facts, articles."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .expr import Expr

FACT_TYPES = ("bool", "number", "choice", "text")
MAX_ANSWER_CHARS = 1000
MAX_NUMBER = 1e300


class TextRule(NamedTuple):
    """How a fact is read from words or pasted text (docs/knowledge-format.md, "Facts from text").

    NamedTuples, not dataclasses, for the rules read on every start: they cost a tenth to define."""

    words: list[str]         # literal phrases, any case, flexible spaces
    regex: list[str]         # {NUM} captures a number as the value
    set: Any = None          # the value a match sets; None: the captured value
    negated: Any = None      # the value a negated match sets; None: a negated match sets nothing
    trust: float = 1.0       # < 1: weaker than a measurement (likelihood ratios are tempered)
    line: int = 0


class KeyRule(NamedTuple):
    """Config keys, command-line flags and keyword arguments that carry a fact's value."""

    keys: list[str]          # snake_case; a dotted key matches a path suffix
    set: Any = None          # a switch: a true value sets this
    values: dict = {}        # choice -> raw spellings (never mutated)
    negated: Any = None      # the value a false switch sets; None: nothing
    index: int | None = None  # a list value (betas: [0.9, 0.95]): the element to take
    line: int = 0
    quoted: bool = False     # only "key": value pasted as JSON (a saved config.json), never a setting
    as_text: bool = False    # a setting's value read with the fact's text rules (a model name), never in text


@dataclass
class FactSpec:
    """A fact a check, a condition or a probe can name: its type, and how text and settings set it."""

    name: str
    type: str
    description: str
    choices: list[str] = field(default_factory=list)
    unit: str = ""
    file: str = ""
    defined_when: Expr | None = None  # outside it the fact has no value to ask for (no NaN: no NaN step)
    text: list[TextRule] = field(default_factory=list)
    keys: list[KeyRule] = field(default_factory=list)
    other_run: bool = False  # its words describe another run (what fixed it): settings named in them are not this run's

    def parse(self, raw: str) -> Any:
        """Turn a typed answer ('yes', '11600', 'bf16') into a value; ValueError if it is not one."""
        text = str(raw).strip()
        if len(text) > MAX_ANSWER_CHARS:
            raise ValueError(f"{self.name}: an answer of {len(text):,} characters is too long "
                             f"(at most {MAX_ANSWER_CHARS})")
        if self.type == "bool":
            low = text.lower()
            if low in ("y", "yes", "true", "1", "是", "对", "有"):
                return True
            if low in ("n", "no", "false", "0", "否", "不是", "没有"):
                return False
            raise ValueError(f"{self.name} expects yes or no, got {text!r}")
        if self.type == "number":
            try:
                value = float(text) if any(c in text for c in ".eE") else int(text)
            except ValueError:
                raise ValueError(f"{self.name} expects a number, got {text!r}") from None
            if not math.isfinite(value) or abs(value) > MAX_NUMBER:
                raise ValueError(f"{self.name} expects a finite number below 1e300, got {text[:40]!r}")
            return value
        if self.type == "choice":
            if text.isdigit() and 1 <= int(text) <= len(self.choices):
                return self.choices[int(text) - 1]
            if text.lower() in [c.lower() for c in self.choices]:
                return next(c for c in self.choices if c.lower() == text.lower())
            raise ValueError(f"{self.name} expects one of {', '.join(self.choices)}, got {text!r}")
        return text


@dataclass
class FindingSpec:
    """A finding id a probe can report (rules/_findings.yaml): what it is called and what it means."""

    id: str
    title: str
    explanation: str
    file: str = ""
    line: int = 0


@dataclass
class Check:
    """A question a symptom asks about a fact, how to find the answer, and what it costs (1-5)."""

    fact: str
    ask: str
    symptom: str
    how: str = ""
    probe: str = ""
    cost: int = 2
    after: str = ""
    line: int = 0


@dataclass
class Evidence:
    """One likelihood ratio of a cause: ``lr`` when ``when`` holds, ``else_lr`` when it does not."""

    when: Expr
    lr: float
    else_lr: float = 1.0
    confirms: bool = False
    says: str = ""
    line: int = 0


@dataclass
class Risk:
    """Settings known to lead to a cause, flagged by `llmfix probe` before the fault shows
    (probes/risks.py): ``when`` over facts, ``says`` what goes wrong and why."""

    when: Expr
    says: str
    line: int = 0


@dataclass
class Sourced:
    """One short statement from public threads (a fix that did not help, how a report put the
    fault) with the threads it comes from."""

    text: str
    sources: list[str]


@dataclass
class Cause:
    """A root cause of one symptom: its prior, the evidence that moves it, its fixes and sources."""

    id: str
    symptom: str
    title: str
    prior: float
    summary: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    not_this_when: str = ""
    reported_as: list[Sourced] = field(default_factory=list)
    same_fault: list[str] = field(default_factory=list)  # causes of other symptoms that are this fault
    risk: Risk | None = None  # settings that lead to it, flagged as a warning when a probe reads them
    line: int = 0

    def cited(self) -> list[str]:
        """Every public origin the cause names: its sources, then the threads of its report phrases."""
        return [*self.sources, *(s for r in self.reported_as for s in r.sources)]


@dataclass
class Fix:
    """Steps that remove a cause (``{{ expr }}`` slots computed from known facts), with sources."""

    id: str
    title: str
    steps: list[str]
    sources: list[str]
    symptom: str = ""
    did_not_work: list[Sourced] = field(default_factory=list)
    line: int = 0


@dataclass
class Symptom:
    """What the user sees (rules/<id>.yaml): its aliases, checks, causes, and when facts show it."""

    id: str
    title: str
    summary: str
    aliases: dict[str, list[str]]
    checks: list[Check] = field(default_factory=list)
    causes: list[Cause] = field(default_factory=list)
    file: str = ""
    # Any one holding is enough; a list, since an unknown fact makes a whole `a or b` unknown.
    observed_when: list[Expr] = field(default_factory=list)      # it happened (a NaN in the log)
    contradicted_when: list[Expr] = field(default_factory=list)  # it did not (a log with no NaN)

    def all_aliases(self) -> list[str]:
        return [self.title, *(a for group in self.aliases.values() for a in group)]


class SignatureContext(NamedTuple):
    """Words near a signature (anywhere in the same paste) that refine what it sets."""

    words: list[str]
    regex: list[str]
    sets: dict[str, Any]


class Signature(NamedTuple):
    """An error line people paste (rules/_signatures/*.yaml) and the facts it establishes."""

    id: str
    title: str
    match: list[str]                       # literal substrings, any case
    regex: list[str]
    sets: dict[str, Any]
    severity: str
    trust: float
    context: list[SignatureContext]
    sources: list[str]
    file: str
    line: int


@dataclass
class Article:
    """A kb/<id>.md article: its title, markdown body and section headings."""

    id: str
    title: str
    body: str
    file: str
    sections: list[str] = field(default_factory=list)


@dataclass
class KnowledgeBase:
    """Everything rules/ and kb/ hold, by id (``lookup`` finds any of them)."""

    symptoms: dict[str, Symptom] = field(default_factory=dict)
    causes: dict[str, Cause] = field(default_factory=dict)
    fixes: dict[str, Fix] = field(default_factory=dict)
    facts: dict[str, FactSpec] = field(default_factory=dict)
    articles: dict[str, Article] = field(default_factory=dict)
    findings: dict[str, FindingSpec] = field(default_factory=dict)
    signatures: dict[str, Signature] = field(default_factory=dict)
    fingerprint: str = ""  # changes with any edit of rules/ or kb/; keys derived caches

    def checks_for(self, fact: str) -> list[Check]:
        return [c for s in self.symptoms.values() for c in s.checks if c.fact == fact]

    def lookup(self, id: str) -> Symptom | Cause | Fix | FactSpec | FindingSpec | Article | None:
        """Any id a user may type after `llmfix kb show` (a fact and a finding may share an id: the
        fact's view shows the finding too)."""
        for table in (self.symptoms, self.causes, self.fixes, self.facts, self.findings, self.articles):
            if id in table:
                return table[id]
        return None
