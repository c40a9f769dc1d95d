"""Training that counts iterations, not epochs: a scheduler it steps is not prepared.

A prepared scheduler steps `num_processes` times per call (runtime/prepared/scheduler.py):
right when each process runs an epoch of its share, 1/N of the batches, so the schedule
keeps its single-process length. A run that loops until a counter of batches reaches a
bound (`while True: for batch in loader: itrs += 1 ... if itrs >= total_itrs: return`,
`while i <= train_iters: for batch in loader: i += 1`) takes as many steps on every
process as on one: a prepared scheduler would run N times too fast (a polynomial decay
past its end takes a negative number to a fractional power).
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

from migrator.analysis.collect import Facts
from migrator.analysis.names import dotted_name
from migrator.analysis.walk import descendants

COUNTED = (
    "stepped in a loop that runs until a count of batches reaches its bound: every process takes "
    "as many steps as one would, so prepared it would step N times too fast"
)
_BOUNDS = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)


def steps_in_counted_loop(facts: Facts, name: str, parent: Callable[[cst.CSTNode], cst.CSTNode | None]) -> bool:
    """Every `name.step()` sits in a loop over batches inside another loop that ends when a
    counter the loop over batches adds to reaches a bound: the outer `while`'s test, or an
    `if` in it that returns or breaks (a comparison that only logs does not end the run)."""
    steps = [
        c for c in facts.calls
        if isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == "step"
        and dotted_name(c.node.func.value) == name
    ]
    return bool(steps) and all(c.loops and _counted(c.loops[-1], parent) for c in steps)


def _counted(batches: cst.For, parent: Callable[[cst.CSTNode], cst.CSTNode | None]) -> bool:
    outer = parent(batches)
    while outer is not None and not isinstance(outer, (cst.While, cst.For, cst.FunctionDef, cst.Module)):
        outer = parent(outer)
    if not isinstance(outer, (cst.While, cst.For)):
        return False
    counters = {
        dotted_name(n.target) for n in descendants(batches.body)
        if isinstance(n, cst.AugAssign) and isinstance(n.operator, cst.AddAssign)
    } - {None}
    ends = [outer.test] if isinstance(outer, cst.While) else []
    ends += [n.test for n in descendants(outer.body) if isinstance(n, cst.If) and _leaves(n.body)]
    return any(_bounds(test, counters) for test in ends)


def _leaves(body: cst.CSTNode) -> bool:
    """The block returns or breaks out."""
    return any(isinstance(n, (cst.Return, cst.Break)) for n in descendants(body))


def _bounds(test: cst.BaseExpression, counters: set[str]) -> bool:
    """`test` compares one of `counters` with `<`, `<=`, `>` or `>=`."""
    for node in [test, *descendants(test)]:
        if not isinstance(node, cst.Comparison):
            continue
        sides = [node.left, *(t.comparator for t in node.comparisons)]
        if any(isinstance(t.operator, _BOUNDS) for t in node.comparisons) and any(dotted_name(s) in counters for s in sides):
            return True
    return False
