"""Running meters filled over a prepared loader, added up across processes after the loop.

ImageNet-style scripts keep `losses = AverageMeter()`, call `losses.update(loss.item(),
images.size(0))` per batch, and read `losses.avg` (`self.avg = self.sum / self.count`)
after the loop: to print it, return it, pick the best model or stop early. Over a
prepared loader each process's meter holds its own share, so `avg` differs between
processes: a best-model test or an early stop that disagrees between them hangs the next
collective. Adding the sums and the counts across processes after the loop, and
recomputing `avg`, gives every process the epoch's figure. Only a class whose `update`
keeps that sum/count/avg bookkeeping qualifies: one defined in this file, or in another
file of the run (Config.project_meters, read by project/meters.py).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst

from migrator.analysis.collect import Facts
from migrator.analysis.names import dotted_name
from migrator.analysis.walk import descendants


@dataclass(frozen=True, eq=False)
class MeterSync:
    """The meters `names` updated in `loop` (over a prepared loader): added up after it."""

    loop: cst.For
    names: tuple[str, ...]
    updates: tuple[cst.Call, ...]
    done: bool = False  # the reduction already follows the loop


def keeps_sum_and_count(cls: ast.ClassDef) -> bool:
    """`update` adds to `self.sum` and `self.count` and sets `self.avg = self.sum / self.count`."""
    update = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "update"), None)
    if update is None:
        return False
    added = {
        _self_attr(n.target) for n in ast.walk(update) if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add)
    }
    averaged = any(
        isinstance(n, ast.Assign) and [_self_attr(t) for t in n.targets] == ["avg"]
        and isinstance(n.value, ast.BinOp) and isinstance(n.value.op, ast.Div)
        and _self_attr(n.value.left) == "sum" and _self_attr(n.value.right) == "count"
        for n in ast.walk(update)
    )
    return {"sum", "count"} <= added and averaged


def meter_classes(code: str) -> frozenset[str]:
    """The top-level classes of `code` that keep the bookkeeping (keeps_sum_and_count)."""
    if "class " not in code or ".count" not in code:
        return frozenset()
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return frozenset()
    return frozenset(n.name for n in tree.body if isinstance(n, ast.ClassDef) and keeps_sum_and_count(n))


def meter_syncs(facts: Facts, classes: frozenset[str], sharded, parent) -> tuple[MeterSync, ...]:
    """Loops over a prepared loader (`sharded(loop_fact)`) that update meters of `classes`
    bound once in the loop's scope, above the loop, updated nowhere else and read after it,
    clocks left out (`done` when
    the sums' reduction already follows the loop)."""
    meters: dict[tuple[int, str], int] = {}  # (scope id, name) -> bindings
    made: dict[tuple[int, str], bool] = {}
    for b in facts.bindings:
        key = (id(b.scope), b.name)
        meters[key] = meters.get(key, 0) + 1
        made[key] = isinstance(b.value, cst.Call) and dotted_name(b.value.func) in classes
    updates: dict[tuple[int, str], list[cst.Call]] = {}
    for c in facts.calls:
        func = c.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "update" and (name := dotted_name(func.value)):
            updates.setdefault((id(c.scope), name), []).append(c.node)
    out = []
    for fact in facts.loops:
        if not sharded(fact):
            continue
        inside = {id(n) for n in descendants(fact.node.body)}
        names, calls = [], []
        for (scope, name), found in updates.items():
            key = (scope, name)
            if scope != id(fact.scope) or not made.get(key) or meters.get(key) != 1:
                continue
            if not any(id(c) in inside for c in found):
                continue
            if not all(id(c) in inside for c in found) or _bound_after(facts, fact, name) or all(_times(c) for c in found):
                continue
            if not _read_after(facts, fact, name, inside):
                continue  # only a progress line in the loop reads it
            names.append(name)
            calls += found
        if names and not _nested_in_another(fact, out):
            out.append(MeterSync(fact.node, tuple(sorted(names)), tuple(calls), _summed_after(fact.node, parent)))
    return tuple(out)


def _summed_after(loop: cst.For, parent) -> bool:
    """The statement after the loop sets `<meter>.count` (the reduction this module writes)."""
    block = parent(loop)
    body = list(getattr(block, "body", ()))
    following = next((body[i + 1] for i, s in enumerate(body) if s is loop and i + 1 < len(body)), None)
    return following is not None and any(
        isinstance(n, cst.Attribute) and n.attr.value == "count" and isinstance(parent(n), (cst.Element, cst.AssignTarget))
        for n in descendants(following)
    )


def _read_after(facts: Facts, fact, name: str, inside: set[int]) -> bool:
    """The meter is read after the loop (printed, returned, compared), in its scope."""
    loop_at = facts.order.get(fact.node, 0)
    base = name.split(".")[0]
    return any(
        load.name == base and load.scope is fact.scope and id(load.node) not in inside and facts.order.get(load.node, 0) > loop_at
        for load in facts.loads
    )


def _times(update: cst.Call) -> bool:
    """`batch_time.update(time.time() - end)`: a clock, not a figure of the data."""
    if not update.args:
        return False
    return any(isinstance(n, cst.Attribute) and n.attr.value in ("time", "perf_counter", "monotonic") for n in descendants(update.args[0].value))


def _bound_after(facts: Facts, fact, name: str) -> bool:
    loop_at = facts.order.get(fact.node, 0)
    return any(b.name == name and b.scope is fact.scope and facts.order.get(b.statement, 0) > loop_at for b in facts.bindings)


def _nested_in_another(fact, found: list[MeterSync]) -> bool:
    return any(fact.node is not s.loop and any(n is fact.node for n in descendants(s.loop.body)) for s in found)


def _self_attr(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None
