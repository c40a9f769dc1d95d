"""Training steps one process may skip on its own: `if loss == 0: continue` above the
backward, `if torch.isnan(loss): break`, or an `except` that swallows the step's error and
goes on. On one process that only drops a step; on N, DDP's all-reduce in every other
process's backward waits for the one that skipped, and the run hangs.

A test that reads only what every process shares (an enumerate index, a counter, a
setting: `if step < args.resume_step: continue`) skips on every process at once and is
not reported. Nothing here edits the tree.
"""

from __future__ import annotations

from typing import Callable, Iterator

import libcst as cst

from migrator.analysis.metric_loop import enumerate_index, names_in
from migrator.analysis.names import dotted_name
from migrator.analysis.walk import walk


def skipped_steps(loop: cst.For | cst.While, is_training: Callable[[cst.CSTNode], bool]) -> Iterator[tuple[cst.CSTNode, str]]:
    """(the statement that skips, why) for each way out of a step that only some
    processes may take; `is_training(node)`: whether `node` holds a backward (or a call
    of a function that runs one)."""
    if not is_training(loop.body):
        return
    local = _bound_in(loop.body) | _loop_values(loop)
    counters = _counters(loop.body)
    per_process = local - counters
    trained = False  # a backward above: a `continue` from here on skips only what follows it
    for statement in _own_statements(loop.body):
        if isinstance(statement, cst.SimpleStatementLine) and is_training(statement):
            trained = True
        if isinstance(statement, cst.If) and _exits(statement.body, breaks_only=trained):
            read = {n.value for n in names_in(statement.test)}
            if read & per_process:
                test = cst.Module([]).code_for_node(statement.test).strip()
                yield statement, f"`if {test}:` leaves the step on the processes where it holds"
        elif isinstance(statement, cst.Try) and is_training(statement.body):
            for handler in statement.handlers:
                if not _raises(handler.body):
                    caught = cst.Module([]).code_for_node(handler.type).strip() if handler.type else "everything"
                    yield handler, f"an error ({caught}) caught here ends the step on the process that raised it alone"
                    break


def _own_statements(block: cst.BaseSuite) -> Iterator[cst.BaseStatement]:
    """The loop's statements, through `if`/`with`/`try` blocks, not into nested loops or
    functions (their `continue` and `break` are their own)."""
    if not isinstance(block, cst.IndentedBlock):
        return
    for statement in block.body:
        yield statement
        if isinstance(statement, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef)):
            continue
        for child in ("body", "orelse", "finalbody"):
            inner = getattr(statement, child, None)
            while inner is not None:  # a block, an `else:`/`finally:`, or an `elif` and what follows it
                if isinstance(inner, cst.BaseSuite):
                    yield from _own_statements(inner)
                    break
                if isinstance(inner, cst.If):
                    yield inner
                body = getattr(inner, "body", None)
                if isinstance(body, cst.BaseSuite):
                    yield from _own_statements(body)
                inner = inner.orelse if isinstance(inner, cst.If) else None
        for handler in getattr(statement, "handlers", ()):
            yield from _own_statements(handler.body)


def _exits(block: cst.BaseSuite, breaks_only: bool = False) -> bool:
    """The block ends the step: a `continue` or `break` of the loop (not of a nested one);
    only a `break` with `breaks_only` (after the backward, a `continue` skips no step)."""
    kinds = (cst.Break,) if breaks_only else (cst.Continue, cst.Break)
    lines = [s.body for s in _own_statements(block) if isinstance(s, cst.SimpleStatementLine)]
    if isinstance(block, cst.SimpleStatementSuite):
        lines.append(block.body)
    return any(isinstance(small, kinds) for line in lines for small in line)


def _raises(block: cst.BaseSuite) -> bool:
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Raise(self, node: cst.Raise) -> None:
            nonlocal found
            found = True

    walk(block, _Find())
    return found


def _loop_values(loop: cst.For | cst.While) -> set[str]:
    """What the loop hands each step (`data` of `for i, data in enumerate(loader)`), not
    its index."""
    if not isinstance(loop, cst.For):
        return set()
    if isinstance(loop.iter, cst.Call) and (dotted_name(loop.iter.func) or "").split(".")[-1] in ("range", "count"):
        return set()  # `for step in range(n)`: a count
    return {n.value for n in names_in(loop.target)} - {enumerate_index(loop)}


def _bound_in(block: cst.CSTNode) -> set[str]:
    names: set[str] = set()

    class _Find(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            names.update(n.value for n in names_in(node.target))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            names.update(n.value for n in names_in(node.target))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            names.update(n.value for n in names_in(node.target))

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    walk(block, _Find())
    return names


def _counters(block: cst.CSTNode) -> set[str]:
    """Names the loop only counts with (`step += 1`): the same on every process."""
    counted: set[str] = set()
    other: set[str] = set()

    class _Find(cst.CSTVisitor):
        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            target = node.target
            if isinstance(target, cst.Name):
                (counted if isinstance(node.value, cst.Integer) else other).add(target.value)

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            other.update(n.value for n in names_in(node.target))

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    walk(block, _Find())
    return counted - other
