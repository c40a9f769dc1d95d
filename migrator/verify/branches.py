"""An object handed to prepare() exists on every path that reaches the call.

`if args.train: model = Net()` with no `else`, then one `accelerator.prepare(model,
optimizer, loader)` below: on the other path the script never read `model`, the
migration does, and fails with UnboundLocalError (or AttributeError for `self.model`).
pyflakes does not follow branches, so this is ours. A name the code below reads on every
path anyway is left alone: there the original would fail the same way.
"""

from __future__ import annotations

import ast
from typing import Iterator

from migrator.verify.names import nested_bodies
from migrator.verify.pair import Pair, Problem
from migrator.verify.program import Program, dotted

CODE = "AM950"
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)
_EXIT_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit"})


def check(pair: Pair) -> list[Problem]:
    seen = {key for key, _ in _maybe_unbound(pair.before)}
    seen |= {key for key, _ in _maybe_unbound(pair.after) if _read_at_top(pair.before, *key)}
    return [
        pair.at_after(
            CODE, call,
            f"left as written: `{name}` would be prepared where it is bound on some paths only "
            "(assigned in a branch or a loop above); bind it on every path, or prepare it where it "
            "is bound, then migrate",
        )
        for (name, _), call in _maybe_unbound(pair.after)
        if (name, _) not in seen
    ]


def _maybe_unbound(program: Program) -> Iterator[tuple[tuple[str, str], ast.Call]]:
    """((name, scope name), prepare call) for each argument of a prepare() that may be unbound there."""
    for prepare in program.prepares:
        scope = next((a for a in program.ancestors(prepare.call) if isinstance(a, _SCOPES)), program.tree)
        statement = program.statement_of(prepare.call)
        for name in filter(None, prepare.args):
            if not _bound_above(scope, name, statement.lineno) or _bound_before(program, statement, scope, name):
                continue
            if _read_after_on_every_path(program, statement, scope, name):
                continue
            yield (name, getattr(scope, "name", "")), prepare.call


def _read_at_top(program: Program, name: str, scope_name: str) -> bool:
    """The original reads `name` in a statement of its scope's own body (on every path
    that gets there): a read the migration may have removed (`model = model.to(device)`)."""
    scopes = [program.tree] if not scope_name else [
        n for n in ast.walk(program.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == scope_name
    ]
    return any(_reads_at_top(s, name) for scope in scopes for s in scope.body)


def _bound_above(scope: ast.AST, name: str, line: int) -> bool:
    """Whether `scope` binds `name` above `line` at all (a name bound only further down is
    names.py's; one never bound here comes from outside: not ours to judge)."""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = scope.args
        if name in {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}:
            return False
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store) and dotted(node) == name:
            if node.lineno < line:
                return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def _bound_before(program: Program, statement: ast.stmt, scope: ast.AST, name: str) -> bool:
    """Every path from the start of `scope` to `statement` binds `name`."""
    return any(_sequence_binds(block[:at], name) for block, at in _levels(program, statement, scope))


def _read_after_on_every_path(program: Program, statement: ast.stmt, scope: ast.AST, name: str) -> bool:
    """A statement after `statement`, on its own level or an enclosing one, reads `name`
    outside any nested block of its own: the original needed the name there too."""
    return any(_reads_at_top(s, name) for block, at in _levels(program, statement, scope) for s in block[at + 1:])


def _levels(program: Program, statement: ast.stmt, scope: ast.AST) -> Iterator[tuple[list[ast.stmt], int]]:
    """(block, index) of `statement` in its block, then of each enclosing statement in its
    own, up to `scope`'s body."""
    node = statement
    while node is not scope:
        parent = program.parents.get(node)
        if parent is None:
            return
        for block in _blocks(parent):
            if node in block:
                yield block, block.index(node)
        node = parent


def _reads_at_top(statement: ast.stmt, name: str) -> bool:
    nested = {id(n) for block in _blocks(statement) for s in block for n in ast.walk(s)}
    return any(
        isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load) and dotted(n) == name and id(n) not in nested
        for n in ast.walk(statement)
    )


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    return [node.body] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)) else nested_bodies(node)


def _sequence_binds(statements: list[ast.stmt], name: str) -> bool:
    return any(_binds(s, name) or _exits(s) for s in statements)


def _binds(statement: ast.stmt, name: str) -> bool:
    """Every path through `statement` that goes on after it binds `name`."""
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return (not isinstance(statement, ast.AnnAssign) or statement.value is not None) and any(
            _target_binds(t, name) for t in targets
        )
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name.split(".")[0]) == name or a.asname == name for a in statement.names)
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return statement.name == name
    if isinstance(statement, ast.If):
        return bool(statement.orelse) and _sequence_binds(statement.body, name) and _sequence_binds(statement.orelse, name)
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        bound = any(i.optional_vars is not None and _target_binds(i.optional_vars, name) for i in statement.items)
        return bound or _sequence_binds(statement.body, name)
    if isinstance(statement, ast.Try) or type(statement).__name__ == "TryStar":
        if _sequence_binds(statement.finalbody, name):
            return True
        return _sequence_binds(statement.body, name) and all(_sequence_binds(h.body, name) for h in statement.handlers)
    return False  # loops may not run


def _target_binds(target: ast.AST, name: str) -> bool:
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_target_binds(e, name) for e in target.elts)
    if isinstance(target, ast.Starred):
        return _target_binds(target.value, name)
    return dotted(target) == name


def _exits(statement: ast.stmt) -> bool:
    if isinstance(statement, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
        return True
    return (
        isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
        and dotted(statement.value.func) in _EXIT_CALLS
    )
