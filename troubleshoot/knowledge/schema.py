"""The documented schema of rules/*.yaml (docs/knowledge-format.md), checked field by field.

Every problem names the file, the line and the field, and says what was expected, e.g.
``rules/nan-loss.yaml:42: causes[3].prior: expected a number between 0 and 1, got 1.5``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

NUMBER = (int, float)
FACT_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")
SYMPTOM_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
CAUSE_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*\.[a-z0-9]+(-[a-z0-9]+)*$")
FIX_ID = re.compile(r"^fix-[a-z0-9]+(-[a-z0-9]+)*$")

# field -> (accepted types, required, description used in messages)
SYMPTOM = {"id": (str, True, "the symptom id (= file name)"), "title": (str, True, "a title"),
           "summary": (str, True, "a summary"), "aliases": (dict, True, "a mapping en/zh/errors -> list"),
           "facts": (dict, False, "a mapping of fact name -> spec"), "checks": (list, False, "a list of checks"),
           "causes": (list, True, "a list of causes"), "fixes": (list, False, "a list of fixes"),
           "observed_when": ((str, list), False, "an expression over facts, or a list of them"),
           "contradicted_when": ((str, list), False, "an expression over facts, or a list of them")}
CHECK = {"fact": (str, True, "a fact name"), "ask": (str, True, "the question"), "how": (str, False, "text"),
         "probe": (str, False, "an llmfix command"),
         "cost": (int, False, "an integer 1..5 (1 = read a file, 5 = rerun training)"),
         "after": (str, False, "a fact name")}
CAUSE = {"id": (str, True, "a cause id <symptom>.<cause>"), "title": (str, True, "a title"),
         "summary": (str, False, "text"), "prior": (NUMBER, True, "a number between 0 and 1"),
         "evidence": (list, False, "a list of evidence items"), "fixes": (list, True, "a list of fix ids"),
         "sources": (list, True, "a list of sources"), "not_this_when": (str, False, "text"),
         "reported_as": (list, False, "a list of {text, sources}"),
         "same_fault": (list, False, "a list of cause ids of other symptoms"),
         "risk": (dict, False, "a mapping {when, says}")}
RISK = {"when": (str, True, "an expression over facts"), "says": (str, True, "what goes wrong with these settings")}
EVIDENCE = {"when": (str, True, "an expression over facts"), "lr": (NUMBER, True, "a likelihood ratio > 0"),
            "else_lr": (NUMBER, False, "a likelihood ratio > 0"), "confirms": (bool, False, "true or false"),
            "says": (str, False, "text")}
FIX = {"id": (str, True, "a fix id fix-..."), "title": (str, True, "a title"),
       "steps": (list, True, "a list of steps"), "sources": (list, True, "a list of sources"),
       "did_not_work": (list, False, "a list of {text, sources}")}
SOURCED = {"text": (str, True, "text"), "sources": (list, True, "a list of sources")}
FACT = {"type": (str, True, "bool, number, choice or text"), "description": (str, True, "text"),
        "choices": (list, False, "a list of choices"), "unit": (str, False, "text"),
        "defined_when": (str, False, "an expression over facts"),
        "other_run": (bool, False, "true or false"),
        "text": (list, False, "a list of text rules {words, regex, set, negated, trust}"),
        "keys": (list, False, "a list of key rules {keys, set, values, negated, index, quoted, as_text}")}
FINDING = {"title": (str, True, "a title"), "explanation": (str, True, "what it means")}
TEXT_RULE = {"words": (list, False, "a list of phrases"), "regex": (list, False, "a list of regular expressions"),
             "set": ((str, int, float, bool), False, "the value a match sets"),
             "negated": ((str, int, float, bool), False, "the value a negated match sets"),
             "trust": (NUMBER, False, "a number in (0, 1]")}
KEY_RULE = {"keys": (list, True, "a list of snake_case keys or flags"),
            "set": ((str, int, float, bool), False, "the value a true switch sets"),
            "values": (dict, False, "a mapping choice -> list of spellings"),
            "negated": ((str, int, float, bool), False, "the value a false switch sets"),
            "index": ((int,), False, "the element of a list value to take"),
            "quoted": ((bool,), False, "true: only the quoted JSON form in pasted text"),
            "as_text": ((bool,), False, "true: a setting's value is read with the fact's text rules")}
SIGNATURE = {"id": (str, True, "a snake_case signature id"), "title": (str, True, "a title"),
             "match": (list, False, "a list of literal substrings"),
             "regex": (list, False, "a list of regular expressions"),
             "sets": (dict, True, "a mapping fact -> value"), "severity": (str, False, "error, warning or info"),
             "trust": (NUMBER, False, "a number in (0, 1]"), "context": (list, False, "a list of {words, regex, sets}"),
             "sources": (list, True, "a list of public sources")}
SIGNATURE_CONTEXT = {"words": (list, False, "a list of phrases"),
                     "regex": (list, False, "a list of regular expressions"),
                     "sets": (dict, True, "a mapping fact -> value")}
SIGNATURE_ID = re.compile(r"^[a-z][a-z0-9_]*$")
KEY = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*$")
ALIAS_GROUPS = ("en", "zh", "errors")
MAX_COST = 5


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


MAX_DEPTH = 12  # rules nest 6 levels deep at most (causes[i].evidence[j].when)
INT_TAG = "tag:yaml.org,2002:int"
MAX_INT_CHARS = 4300  # Python refuses to convert longer decimal strings (sys.get_int_max_str_digits)


class KnowledgeFileError(ValueError):
    """A knowledge file that parses as YAML but uses something the knowledge format refuses."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


class Located:
    """A parsed YAML document plus the line of every node, for messages that name the line."""

    @classmethod
    def cached(cls, file: str, data: Any, lines: list) -> Located:
        """Rebuild from what ``to_cache`` saved (JSON keeps int vs str path parts apart)."""
        doc = cls.__new__(cls)
        doc.file, doc.data, doc.validated = file, data, True
        doc.lines = {tuple(path): line for path, line in lines}
        return doc

    def to_cache(self) -> dict:
        return {"data": self.data, "lines": [[list(path), line] for path, line in self.lines.items()]}

    def __init__(self, text: str, file: str) -> None:
        self.file = file
        self.validated = False  # True only when rebuilt from the cache of a problem-free load
        self.lines: dict[tuple, int] = {}
        # What yaml.safe_load does, split in two so the node tree also gives line numbers (and is
        # checked before anything is built from it), with libyaml's SafeLoader when present (10x
        # faster; same safe constructor). Imported here: with the parse cache warm, `llmfix ask`
        # never needs yaml.
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
        try:
            node = loader.get_single_node()
            self._index(node, (), set())
            self.data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()

    def _index(self, node: Any, path: tuple, seen: set[int]) -> None:
        """Record every node's line; refuse what knowledge files never need and hostile files use:
        anchors/aliases (a 1 KB alias bomb expands to gigabytes), duplicate keys (the last one
        would silently win), nesting deeper than MAX_DEPTH, integers Python will not convert."""
        import yaml

        if node is None:
            return
        line = node.start_mark.line + 1
        if id(node) in seen:
            raise KnowledgeFileError(line, "YAML anchors and aliases (&name / *name) are not allowed here")
        if len(path) > MAX_DEPTH:
            raise KnowledgeFileError(line, f"nested deeper than {MAX_DEPTH} levels")
        seen.add(id(node))
        self.lines[path] = line
        if isinstance(node, yaml.MappingNode):
            keys = set()
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode):
                    raise KnowledgeFileError(key.start_mark.line + 1, "a mapping key must be plain text")
                if key.value in keys:
                    raise KnowledgeFileError(key.start_mark.line + 1, f"duplicate key '{key.value}'")
                keys.add(key.value)
                self._index(value, path + (key.value,), seen)
                self.lines[path + (key.value, "<key>")] = key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._index(item, path + (i,), seen)
        elif node.tag == INT_TAG and len(node.value) > MAX_INT_CHARS:
            raise KnowledgeFileError(line, f"number too long ({len(node.value)} characters)")

    def line(self, path: tuple) -> int:
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path, 1)

    def problem(self, path: tuple, message: str) -> Problem:
        return Problem(self.file, self.line(path), field_name(path), message)


def field_name(path: tuple) -> str:
    out = ""
    for part in path:
        if part == "<key>":
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def check_fields(doc: Located, path: tuple, value: Any, spec: dict, problems: list[Problem]) -> dict | None:
    """Check one mapping against a field spec.

    Returns the mapping with every unknown or wrongly typed field left out (so readers never meet
    a value of the wrong type), or None when it is not a mapping at all."""
    if not isinstance(value, dict):
        problems.append(doc.problem(path, f"expected a mapping, got {type(value).__name__}"))
        return None
    clean = {}
    for key in value:
        if key not in spec:
            problems.append(doc.problem(path + (key, "<key>"),
                                        f"unknown field '{key}' (expected one of: {', '.join(spec)})"))
    for key, (types, required, what) in spec.items():
        if key not in value or value[key] is None:
            if required:
                problems.append(doc.problem(path, f"missing required field '{key}' ({what})"))
            continue
        item = value[key]
        if not isinstance(item, types) or (types is NUMBER and not is_number(item)):
            problems.append(doc.problem(path + (key,), f"expected {what}, got {type(item).__name__} {_short(item)}"))
            continue
        if types is int and not 1 <= item <= MAX_COST:
            problems.append(doc.problem(path + (key,), f"expected {what}, got {item}"))
            continue
        clean[key] = item
    return clean


def is_number(value: Any) -> bool:
    """A finite int or float, not a bool (YAML's .inf and .nan are not numbers a rule can use)."""
    if isinstance(value, bool) or not isinstance(value, NUMBER):
        return False
    if isinstance(value, int):
        return abs(value) < 10 ** 300  # math.isfinite overflows on a 400-digit int
    return math.isfinite(value) and abs(value) < 1e300


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        text = "a huge number"
    return text if len(text) <= 60 else text[:57] + "..."


def check_strings(doc: Located, path: tuple, items: Any, what: str, problems: list[Problem]) -> list[str]:
    """A list of non-empty strings (aliases, sources, steps); returns the good ones."""
    if not isinstance(items, list):
        return []
    good = []
    for i, item in enumerate(items):
        if isinstance(item, str) and item.strip():
            good.append(item)
        else:
            problems.append(doc.problem(path + (i,), f"expected {what} (a non-empty string), got {_short(item)}"))
    return good


def check_fact_spec(doc: Located, path: tuple, name: str, spec: Any, problems: list[Problem]) -> dict | None:
    """A fact's spec with its fields checked (choices as strings), or None when it is unusable."""
    if not FACT_NAME.match(str(name)):
        problems.append(doc.problem(path + ("<key>",),
                                    f"fact name '{name}' must be dotted lower_snake, e.g. data.mask.binary"))
        return None
    spec = check_fields(doc, path, spec, FACT, problems)
    if spec is None or "type" not in spec or "description" not in spec:
        return None
    if spec["type"] not in ("bool", "number", "choice", "text"):
        problems.append(doc.problem(path + ("type",), f"expected bool, number, choice or text, got {spec['type']!r}"))
        return None
    spec["choices"] = check_strings(doc, path + ("choices",), spec.get("choices"), "a choice", problems)
    if spec["type"] == "choice" and not spec["choices"]:
        problems.append(doc.problem(path, "a choice fact needs 'choices'"))
        return None
    return spec
