"""Every name the migration uses is bound before use, on every path, in its scope.

pyflakes does the def-use analysis (it walks each scope in order and knows Python's
binding rules: a name assigned anywhere in a function is local there, comprehension
scopes, globals, builtins). We count its "undefined" messages before and after, so a
script that already had some is judged only on what the migration adds. pyflakes does
not follow attributes, so `self.x` read in `__init__` before it is assigned is ours.
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import Iterator

from pyflakes import checker, messages

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import Program

CODE = "AM950"
_UNDEFINED = (messages.UndefinedName, messages.UndefinedLocal)


def check(pair: Pair) -> list[Problem]:
    return list(_unbound_names(pair)) + list(_attributes_read_early(pair))


def _undefined(program: Program) -> list:
    found = checker.Checker(program.tree, filename="<migrated>").messages
    return [m for m in found if isinstance(m, _UNDEFINED)]


def _unbound_names(pair: Pair) -> Iterator[Problem]:
    seen = Counter(m.message_args[0] for m in _undefined(pair.before))
    for m in sorted(_undefined(pair.after), key=lambda m: (m.lineno, m.col)):
        name = m.message_args[0]
        if seen[name] > 0:
            seen[name] -= 1
            continue
        yield pair.at_after_place(
            CODE, m.lineno, m.col,
            f"left as written: the migration would use `{name}` where it is not bound "
            "(before its assignment, or in a scope that cannot see it)",
        )


def _attributes_read_early(pair: Pair) -> Iterator[Problem]:
    seen = Counter(key for key, _ in _early_reads(pair.before))
    for key, node in _early_reads(pair.after):
        if seen[key] > 0:
            seen[key] -= 1
            continue
        yield pair.at_after(
            CODE, node,
            f"left as written: the migration would read `self.{key[1]}` in "
            f"`{key[0]}.__init__` before it is assigned there",
        )


def _early_reads(program: Program) -> Iterator[tuple[tuple[str, str], ast.Attribute]]:
    """`self.x` loads in an `__init__` that come before the first `self.x = ...` in it."""
    for node in program.nodes:
        if not isinstance(node, ast.ClassDef):
            continue
        class_names = {getattr(t, "id", None) for s in node.body for t in getattr(s, "targets", [])}
        class_names |= {getattr(s, "name", None) for s in node.body}
        for init in (s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"):
            assigned_later = {a.target[5:] for a in program.assigns if a.scope is init and a.target.startswith("self.")}
            assigned: set[str] = set()
            for statement in init.body:
                for load in _self_loads(statement):
                    attr = load.attr
                    if attr in assigned_later and attr not in assigned and attr not in class_names:
                        yield (node.name, attr), load
                assigned |= _self_stores(statement)


def _self_loads(statement: ast.stmt) -> Iterator[ast.Attribute]:
    for n in ast.walk(statement):
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name) and n.value.id == "self":
            yield n


def _self_stores(statement: ast.stmt) -> set[str]:
    return {
        n.attr for n in ast.walk(statement)
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) and n.value.id == "self"
    }
