"""The package's import graph: no cycles, and data flows one way (probes never import report/).

Every import counts, including those inside functions (a lazy import hides a cycle from Python,
not from the reader). Edges are read from the source with ``ast``; nothing is imported.
"""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "troubleshoot"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                # "from pkg import mod" needs mod; "from pkg import name" needs pkg's __init__
                subs = {f"{stem}.{a.name}" for a in node.names} & modules.keys()
                targets |= subs or {stem}
                if len(subs) < len(node.names):
                    targets.add(stem)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read():
    graph = _edges(_modules())
    assert "troubleshoot.loaders.logs.formats" in graph["troubleshoot.loaders.logs"]
    assert "troubleshoot.probes.context" in graph["troubleshoot.probes.logs"]
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]  # the checker finds one


def test_no_import_cycle():
    assert _cycles(_edges(_modules())) == []


def test_probes_and_loaders_never_import_report_or_cli():
    graph = _edges(_modules())
    bad = {(m, t) for m, targets in graph.items() if m.startswith(("troubleshoot.probes", "troubleshoot.loaders"))
           for t in targets if t.startswith(("troubleshoot.report", "troubleshoot.cli"))}
    assert not bad, bad


HELPERS = {"data.batch": ("data/labels.py", "data/text.py"), "forward.gradflow": ("forward/nonfinite.py",),
           "config": ("config_router.py",), "weights": ("weights_export.py",)}


def _fact_literals(family_module: str, facts: set[str]) -> set[str]:
    """Registered fact names written as string literals in a family's code (its PUBLISHES aside)."""
    root = PKG / "probes"
    path = root.joinpath(*family_module.split("."))
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
    files += [root / h for h in HELPERS.get(family_module, ())]
    found = set()
    for f in files:
        for top in ast.parse(f.read_text()).body:
            if isinstance(top, ast.Assign) and any(getattr(t, "id", "") == "PUBLISHES" for t in top.targets):
                continue
            found |= {n.value for n in ast.walk(top) if isinstance(n, ast.Constant) and n.value in facts}
    return found


def test_publishes_declarations_match_the_code(shipped_kb):
    from troubleshoot.probes import FAMILIES, publishes

    declared = publishes()
    modules = dict(FAMILIES)
    for family, facts in declared.items():
        assert set(facts) <= shipped_kb.facts.keys(), f"{family}: unregistered {set(facts) - shipped_kb.facts.keys()}"
        assert set(facts) == _fact_literals(modules[family], set(shipped_kb.facts)), family
