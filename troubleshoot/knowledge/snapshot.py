"""The knowledge base compiled into one cache file, so that a warm `llmfix ask` loads it in one read.

Reading rules/ and kb/ parses YAML (or replays its parse cache), checks every field against the
schema and records line numbers for messages; on knowledge that loaded without a problem and has
not changed since, none of that can find anything new. So after such a load the KnowledgeBase is
written as plain data: each object as the list of its fields in declaration order, and each
expression as its source, the facts it reads and the fact its evaluation stops at while none of
them is known (``Expr.compiled``), so that a run knowing few facts parses few conditions.

The snapshot is keyed on the stamp (size, mtime, ctime) of every knowledge file and of each module
that decides what a KnowledgeBase holds (READERS). A file of another shape, or one that does not
decode, is a miss: the knowledge is read again and the snapshot rewritten. tests/test_snapshot.py
checks that a snapshot holds every field and that `ask` answers byte for byte as after a full read.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from . import cache
from .expr import Expr
from .model import (
    Article,
    Cause,
    Check,
    Evidence,
    FactSpec,
    FindingSpec,
    Fix,
    KeyRule,
    KnowledgeBase,
    Risk,
    Signature,
    SignatureContext,
    Sourced,
    Symptom,
    TextRule,
)

FORMAT = 1
READERS = ("read.py", "read_text.py", "schema.py", "model.py", "expr.py", "snapshot.py")
# KnowledgeBase tables stored as rows; ``causes`` is rebuilt from the symptoms (the same objects).
TABLES = {"symptoms": Symptom, "fixes": Fix, "facts": FactSpec, "findings": FindingSpec,
          "signatures": Signature, "articles": Article}


def key(root: Path, files: list[Path]) -> list:
    """What a snapshot must have been built from: these files and these readers, unchanged."""
    here = Path(__file__).parent
    return [FORMAT, str(root.resolve()), [[str(p.relative_to(root)), *cache.stamp(p)] for p in files],
            [[name, *cache.stamp(here / name)] for name in READERS]]


def read(root: Path, stamps: list) -> KnowledgeBase | None:
    """The snapshot written for exactly ``stamps``, or None."""
    saved = cache.load(_path(stamps))
    if not isinstance(saved, dict) or saved.get("key") != stamps:
        return None
    try:
        return decode(saved["kb"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def write(root: Path, stamps: list, kb: KnowledgeBase) -> None:
    cache.save(_path(stamps), {"key": stamps, "kb": encode(kb)})


def _path(stamps: list) -> Path:
    return cache.path("knowledge", stamps[1].encode())


# --------------------------------------------------------------------------- encoding
def encode(kb: KnowledgeBase) -> dict:
    out: dict[str, Any] = {name: [_row(item) for item in getattr(kb, name).values()] for name in TABLES}
    out["fingerprint"] = kb.fingerprint
    return out


def _row(obj: Any) -> list:
    values = obj if isinstance(obj, tuple) else [getattr(obj, f.name) for f in fields(obj)]
    return [_plain(value) for value in values]


def _plain(value: Any) -> Any:
    if isinstance(value, Expr):
        return value.compiled()
    if is_dataclass(value) or isinstance(value, tuple) and hasattr(value, "_fields"):
        return _row(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------- decoding
def decode(data: dict) -> KnowledgeBase:
    kb = KnowledgeBase(fingerprint=data["fingerprint"])
    for name, cls in TABLES.items():
        read_row = _READ[cls]
        table = getattr(kb, name)
        for row in data[name]:
            item = read_row(row)
            table[item.name if cls is FactSpec else item.id] = item
    kb.causes = {cause.id: cause for symptom in kb.symptoms.values() for cause in symptom.causes}
    return kb


def _expr(row: list) -> Expr:
    return Expr.from_compiled(*row)


def _one(cls: type) -> Callable[[list], Any]:
    return lambda row: _READ[cls](row)


def _many(cls: type) -> Callable[[list], list]:
    return lambda rows: [_READ[cls](row) for row in rows]


def _exprs(rows: list) -> list[Expr]:
    return [_expr(row) for row in rows]


# The fields holding knowledge objects rather than plain data, and how each is read back.
NESTED: dict[type, dict[str, Callable[[Any], Any]]] = {
    Evidence: {"when": _expr},
    Risk: {"when": _expr},
    Cause: {"evidence": _many(Evidence), "reported_as": _many(Sourced), "risk": _one(Risk)},
    Fix: {"did_not_work": _many(Sourced)},
    Symptom: {"checks": _many(Check), "causes": _many(Cause), "observed_when": _exprs, "contradicted_when": _exprs},
    FactSpec: {"defined_when": _expr, "text": _many(TextRule), "keys": _many(KeyRule)},
    Signature: {"context": _many(SignatureContext)},
}


def _reader(cls: type) -> Callable[[list], Any]:
    names = cls._fields if issubclass(cls, tuple) else [f.name for f in fields(cls)]
    nested = [(i, NESTED[cls][name]) for i, name in enumerate(names) if name in NESTED.get(cls, {})]

    def read_row(row: list) -> Any:
        if len(row) != len(names):
            raise ValueError(f"a {cls.__name__} of {len(row)} fields")
        for i, convert in nested:
            if row[i] is not None:
                row[i] = convert(row[i])
        return cls(*row)
    return read_row


_READ = {cls: _reader(cls) for cls in (Article, Cause, Check, Evidence, FactSpec, FindingSpec, Fix, Risk, Sourced,
                                       KeyRule, Signature, SignatureContext, Symptom, TextRule)}
