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
    return list(_unbound_names(pair)) + list(_module_reads_before_binding(pair)) + list(_attributes_read_early(pair))


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
    """`self.x` loads in an `__init__` that come before the first `self.x = ...` in it, in
    the order the statements run (a branch's assignments count from the branch on)."""
    for node in program.nodes:
        if not isinstance(node, ast.ClassDef):
            continue
        class_names = {getattr(t, "id", None) for s in node.body for t in getattr(s, "targets", [])}
        class_names |= {getattr(s, "name", None) for s in node.body}
        for init in (s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"):
            assigned_later = {a.target[5:] for a in program.assigns if a.scope is init and a.target.startswith("self.")}
            assigned: set[str] = set()
            found: list[tuple[tuple[str, str], ast.Attribute]] = []

            def visit(statements: list[ast.stmt]) -> None:
                for statement in statements:
                    own = _own_expressions(statement)
                    for load in (n for expr in own for n in _self_attributes(expr, ast.Load)):
                        if load.attr in assigned_later and load.attr not in assigned and load.attr not in class_names:
                            found.append(((node.name, load.attr), load))
                    assigned.update(n.attr for expr in own for n in _self_attributes(expr, ast.Store))
                    for body in nested_bodies(statement):
                        visit(body)

            visit(init.body)
            yield from found


def _self_attributes(expr: ast.AST, ctx: type) -> Iterator[ast.Attribute]:
    for n in ast.walk(expr):
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ctx) and isinstance(n.value, ast.Name) and n.value.id == "self":
            yield n


def _module_reads_before_binding(pair: Pair) -> Iterator[Problem]:
    """pyflakes lets module-level code read a name that some later line (or a function's
    `global`) binds. A migration must not add such a read: `prepare(model, optimizer)` put
    above the line that creates the optimizer fails with NameError on the common path."""
    seen = Counter(name for name, _ in _early_module_reads(pair.before.tree))
    for name, node in _early_module_reads(pair.after.tree):
        if seen[name] > 0:
            seen[name] -= 1
            continue
        yield pair.at_after(
            CODE, node,
            f"left as written: the migration would read `{name}` at module level before the line "
            "that first binds it there",
        )


def _early_module_reads(tree: ast.Module) -> list[tuple[str, ast.Name]]:
    """Module-level reads of a name the module binds only further down, in order. A branch's
    bindings count from the branch on (an optimistic reading: only sure mistakes count)."""
    lines: dict[str, list[int]] = {}  # name -> the lines of the module-level statements binding it
    for stmt in tree.body:
        for name, line in _bound_by(stmt):
            lines.setdefault(name, []).append(line)
    bound: set[str] = set()
    found: list[tuple[str, ast.Name]] = []

    def visit(stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            end = stmt.end_lineno or stmt.lineno
            for expr in _own_expressions(stmt):
                for node in _loads(expr):
                    if node.id not in bound and any(line > end for line in lines.get(node.id, ())):
                        found.append((node.id, node))
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(stmt.name)
                continue
            bound.update(_targets(stmt))
            for body in nested_bodies(stmt):
                visit(body)

    visit(tree.body)
    return found


def _bound_by(stmt: ast.stmt) -> list[tuple[str, int]]:
    """(name, line) for each name a module-level statement binds, its nested blocks
    included (not functions' bodies)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [(stmt.name, stmt.lineno)]
    out = [(name, stmt.lineno) for name in _targets(stmt)]
    for body in nested_bodies(stmt):
        for inner in body:
            out += _bound_by(inner)
    return out


def _targets(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    targets: list[ast.AST] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    elif isinstance(stmt, ast.Try):
        return [h.name for h in stmt.handlers if h.name]
    names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    return names + [n.target.id for n in ast.walk(stmt) if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name)]


def nested_bodies(stmt: ast.stmt) -> list[list[ast.stmt]]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    out = [getattr(stmt, f) for f in ("body", "orelse", "finalbody") if isinstance(getattr(stmt, f, None), list)]
    out += [h.body for h in getattr(stmt, "handlers", [])]
    out += [c.body for c in getattr(stmt, "cases", [])]
    return out


def _own_expressions(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions a statement evaluates itself (not those of its nested blocks, nor a
    function's body; a def's decorators and defaults are evaluated where it stands)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [*stmt.decorator_list, *stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d)]
    if isinstance(stmt, ast.ClassDef):
        return [*stmt.decorator_list, *stmt.bases]
    nested = {id(s) for body in nested_bodies(stmt) for s in body}
    return [c for c in ast.iter_child_nodes(stmt) if id(c) not in nested and not isinstance(c, ast.stmt)]


def _loads(expr: ast.AST) -> Iterator[ast.Name]:
    """Name reads in `expr`, not inside a lambda or a comprehension's own scope."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            yield node
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        stack.extend(ast.iter_child_nodes(node))
