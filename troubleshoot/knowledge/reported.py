"""Every finding id the package's code can report, read from its source with ``ast`` (nothing is
imported, so ``kb lint`` stays free of torch). ``kb lint`` checks them against rules/_findings.yaml.

A finding id is the first argument of ``obs.find(...)`` / ``Finding(...)`` or the first item of an
``(id, severity, message)`` tuple. Ids built at run time are followed to their constants: both
branches of ``a if c else b``, a local variable's assignments, a dict's values
(``IDS.get(kind, default)``) and, for a function parameter, the constants passed at that position
by the calls in the same module, a loop variable over a literal table of tuples.
"""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1]
SEVERITIES = ("error", "warning", "info")


def finding_ids(root: Path = PKG) -> dict[str, str]:
    """{finding id: the file (relative to the package) that reports it first}."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fid in _Module(tree).ids():
            out.setdefault(fid, str(path.relative_to(root)))
    return out


class _Module:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        self.module_values = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                              for t in node.targets if isinstance(t, ast.Name)}

    def ids(self) -> set[str]:
        found: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and node.args and _is_report(node.func):
                found |= self.constants(node.args[0], node)
            elif isinstance(node, ast.Tuple) and len(node.elts) >= 3 and _const(node.elts[1]) in SEVERITIES:
                found |= self.constants(node.elts[0], node)
        return {f for f in found if "." in f}

    def constants(self, expr: ast.AST, at: ast.AST) -> set[str]:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return {expr.value}
        if isinstance(expr, ast.IfExp):
            return self.constants(expr.body, at) | self.constants(expr.orelse, at)
        if isinstance(expr, ast.Dict):
            return set().union(*(self.constants(v, at) for v in expr.values)) if expr.values else set()
        if isinstance(expr, ast.Subscript):
            return self.constants(expr.value, at)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "get":
            return self.constants(expr.func.value, at) | set().union(*(self.constants(a, at) for a in expr.args[1:]))
        if isinstance(expr, ast.Name):
            return self._name(expr.id, at)
        return set()

    def _name(self, name: str, at: ast.AST) -> set[str]:
        func = self._enclosing(at)
        if func is not None:
            values = [n.value for n in ast.walk(func) if isinstance(n, ast.Assign)
                      and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
            values += [row.elts[k] for n in ast.walk(func) if isinstance(n, ast.For)
                       and isinstance(n.target, ast.Tuple) and isinstance(n.iter, (ast.Tuple, ast.List))
                       for k, t in enumerate(n.target.elts) if isinstance(t, ast.Name) and t.id == name
                       for row in n.iter.elts if isinstance(row, ast.Tuple) and len(row.elts) > k]
            if values:
                return set().union(*(self.constants(v, v) for v in values))
            params = [a.arg for a in func.args.args]
            if name in params:
                return self._passed(func.name, params.index(name))
        if name in self.module_values:
            return self.constants(self.module_values[name], self.module_values[name])
        return set()

    def _passed(self, func_name: str, index: int) -> set[str]:
        calls = [n for n in ast.walk(self.tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id == func_name and len(n.args) > index]
        return set().union(*(self.constants(c.args[index], c) for c in calls)) if calls else set()

    def _enclosing(self, node: ast.AST):
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node
        return None


def _is_report(func: ast.AST) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "find") or (isinstance(func, ast.Name)
                                                                         and func.id == "Finding")


def _const(node: ast.AST):
    return node.value if isinstance(node, ast.Constant) else None
