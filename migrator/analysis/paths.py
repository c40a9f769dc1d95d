"""Whether a statement binds a name on every path through it.

`if args.train: train_loader = DataLoader(...)` binds the loader on one path only. One
`accelerator.prepare(model, optimizer, train_loader)` placed after that `if` reads the
name on the other path too, where the original never did: an UnboundLocalError (or an
AttributeError for `self.train_loader`) the script did not have. The prepare plan asks
this module which bindings are conditional and prepares those where they are bound.
"""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from migrator.analysis.names import dotted_name

_EXITS = (cst.Return, cst.Raise, cst.Break, cst.Continue)
_EXIT_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit"})


def binds_on_every_path(statement: cst.CSTNode, name: str) -> bool:
    """True when every path through `statement` that goes on after it binds `name`
    (a path that returns, raises or exits does not go on)."""
    if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return any(_small_binds(small, name) for small in statement.body)
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return statement.name.value == name
    if isinstance(statement, cst.If):
        if statement.orelse is None or not sequence_binds(_body(statement.body), name):
            return False
        if isinstance(statement.orelse, cst.If):
            return binds_on_every_path(statement.orelse, name)
        return sequence_binds(_body(statement.orelse.body), name)
    if isinstance(statement, cst.With):
        as_names = {dotted_name(i.asname.name) for i in statement.items if i.asname is not None}
        return name in as_names or sequence_binds(_body(statement.body), name)
    if isinstance(statement, (cst.Try, cst.TryStar)):
        if statement.finalbody is not None and sequence_binds(_body(statement.finalbody.body), name):
            return True
        return sequence_binds(_body(statement.body), name) and all(
            sequence_binds(_body(h.body), name) for h in statement.handlers
        )
    return False  # loops may not run; match and the rest: not followed


def sequence_binds(statements: Sequence[cst.CSTNode], name: str) -> bool:
    """A block binds `name` on every path when a statement of it does, or ends the path first."""
    for statement in statements:
        if binds_on_every_path(statement, name) or exits(statement):
            return True
    return False


def exits(statement: cst.CSTNode) -> bool:
    """`return`, `raise`, `break`, `continue` or `sys.exit(...)`: the path ends here."""
    if not isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return False
    for small in statement.body:
        if isinstance(small, _EXITS):
            return True
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and dotted_name(small.value.func) in _EXIT_CALLS:
            return True
    return False


def _body(block: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return block.body if isinstance(block, cst.IndentedBlock) else (block,)


def _small_binds(small: cst.BaseSmallStatement, name: str) -> bool:
    if isinstance(small, cst.Assign):
        return any(_target_binds(t.target, name) for t in small.targets)
    if isinstance(small, cst.AnnAssign):
        return small.value is not None and _target_binds(small.target, name)
    if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
        for alias in small.names:
            bound = alias.asname.name if alias.asname is not None else alias.name
            if dotted_name(bound) == name or (alias.asname is None and (dotted_name(bound) or "").split(".")[0] == name):
                return True
    return False


def _target_binds(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_target_binds(e.value, name) for e in target.elements)
    return dotted_name(target) == name
