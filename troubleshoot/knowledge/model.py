"""The knowledge base as plain data: symptoms, checks, causes, evidence, fixes, facts, articles."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .expr import Expr

FACT_TYPES = ("bool", "number", "choice", "text")
MAX_ANSWER_CHARS = 1000
MAX_NUMBER = 1e300


@dataclass
class FactSpec:
    name: str
    type: str
    description: str
    choices: list[str] = field(default_factory=list)
    unit: str = ""
    file: str = ""

    def parse(self, raw: str) -> Any:
        """Turn a typed answer ('yes', '11600', 'bf16') into a value; ValueError if it is not one."""
        text = str(raw).strip()
        if len(text) > MAX_ANSWER_CHARS:
            raise ValueError(f"{self.name}: an answer of {len(text):,} characters is too long (at most {MAX_ANSWER_CHARS})")
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
class Check:
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
    when: Expr
    lr: float
    else_lr: float = 1.0
    confirms: bool = False
    says: str = ""
    line: int = 0


@dataclass
class Cause:
    id: str
    symptom: str
    title: str
    prior: float
    summary: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    not_this_when: str = ""
    line: int = 0


@dataclass
class FixAttempt:
    text: str
    sources: list[str]


@dataclass
class Fix:
    id: str
    title: str
    steps: list[str]
    sources: list[str]
    symptom: str = ""
    did_not_work: list[FixAttempt] = field(default_factory=list)
    line: int = 0


@dataclass
class Symptom:
    id: str
    title: str
    summary: str
    aliases: dict[str, list[str]]
    checks: list[Check] = field(default_factory=list)
    causes: list[Cause] = field(default_factory=list)
    file: str = ""

    def all_aliases(self) -> list[str]:
        return [self.title, *(a for group in self.aliases.values() for a in group)]


@dataclass
class Article:
    id: str
    title: str
    body: str
    file: str
    sections: list[str] = field(default_factory=list)


@dataclass
class KnowledgeBase:
    symptoms: dict[str, Symptom] = field(default_factory=dict)
    causes: dict[str, Cause] = field(default_factory=dict)
    fixes: dict[str, Fix] = field(default_factory=dict)
    facts: dict[str, FactSpec] = field(default_factory=dict)
    articles: dict[str, Article] = field(default_factory=dict)
    fingerprint: str = ""  # changes with any edit of rules/ or kb/; keys derived caches

    def checks_for(self, fact: str) -> list[Check]:
        return [c for s in self.symptoms.values() for c in s.checks if c.fact == fact]

    def lookup(self, id: str) -> Symptom | Cause | Fix | FactSpec | Article | None:
        """Any id a user may type after `llmfix kb show`."""
        for table in (self.symptoms, self.causes, self.fixes, self.facts, self.articles):
            if id in table:
                return table[id]
        return None
