"""Running meters filled over a prepared loader, added up across processes after the loop.

ImageNet-style scripts keep `losses = AverageMeter()`, call `losses.update(loss.item(),
images.size(0))` per batch, and read `losses.avg` (`self.avg = self.sum / self.count`)
after the loop: to print it, return it, pick the best model or stop early. Over a
prepared loader each process's meter holds its own share, so `avg` differs between
processes: a best-model test or an early stop that disagrees between them hangs the next
collective. Adding the sums and the counts across processes after the loop, and
recomputing `avg`, gives every process the epoch's figure. Meters kept in a dict
(`avg_meters = {'loss': AverageMeter(), 'iou': AverageMeter()}`, UNet++) count too, each by
its key. Only a class whose `update`
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
    names: tuple[str, ...]  # as the code spells them (`losses`, `avg_meters['loss']`)
    updates: tuple[cst.Call, ...]
    done: bool = False  # the reduction already follows the loop
    keys: tuple[str, ...] = ()  # the same, a dict's key written one way (`avg_meters['loss']`)


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
        for spelled in _meters_of_dict(b.name, b.value, classes):  # `avg_meters = {'loss': AverageMeter(), ...}`
            made[(id(b.scope), spelled)] = meters[key] == 1
    updates: dict[tuple[int, str], list[cst.Call]] = {}
    for c in facts.calls:
        func = c.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "update" and (name := _spelled(func.value)):
            updates.setdefault((id(c.scope), name), []).append(c.node)
    out = []
    for fact in facts.loops:
        if not sharded(fact):
            continue
        inside = {id(n) for n in descendants(fact.node.body)}
        names, calls = [], []
        for (scope, name), found in updates.items():
            key = (scope, name)
            if scope != id(fact.scope) or not made.get(key) or meters.get((scope, _base(name))) != 1:
                continue
            if not any(id(c) in inside for c in found):
                continue
            if not all(id(c) in inside for c in found) or _bound_after(facts, fact, _base(name)) or all(_times(c) for c in found):
                continue
            if not _read_after(facts, fact, name, inside):
                continue  # only a progress line in the loop reads it
            names.append((name, _code(found[0].func.value)))  # type: ignore[attr-defined]
            calls += found
        if names and not _nested_in_another(fact, out):
            names.sort()
            out.append(MeterSync(
                fact.node, tuple(shown for _, shown in names), tuple(calls), _summed_after(fact.node, parent),
                tuple(key for key, _ in names),
            ))
    return tuple(out)


def why_left(sync: MeterSync, branches) -> str | None:
    """Why the sums of `sync` cannot be added up after its loop (left as a finding), or None."""
    if any(isinstance(n, cst.Return) for n in descendants(sync.loop.body)):
        return "the loop returns from inside, so not every process reaches its end"
    if branches.branch_of(sync.loop) is not None:
        return "the loop runs on some processes only"
    return None


_AVERAGES = {"avg", "sum", "count"}
_BUILDERS = {"dict", "OrderedDict", "collections.OrderedDict", "float", "round", "int", "list", "tuple"}


def returns_synced_meters(function: cst.FunctionDef, syncs: tuple[MeterSync, ...]) -> bool:
    """Every `return` of `function` hands back figures of meters whose sums are added up
    across processes after their loop in it (`OrderedDict([('loss', avg_meters['loss'].avg)])`,
    `losses.avg`, constants): once migrated, the result is the same on every process."""
    inside = {id(n) for n in descendants(function.body)}
    names = {n for s in syncs if id(s.loop) in inside for n in s.keys}
    returns = [n for n in descendants(function.body) if isinstance(n, cst.Return)]
    if not names or not returns or any(r.value is None for r in returns):
        return False
    return all(_of_meters(r.value, names) for r in returns)


def _of_meters(node: cst.CSTNode, names: set[str]) -> bool:
    if isinstance(node, (cst.BaseNumber, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.Attribute) and node.attr.value in _AVERAGES:
        return _spelled(node.value) in names
    if isinstance(node, cst.Call):
        return dotted_name(node.func) in _BUILDERS and all(_of_meters(a.value, names) for a in node.args)
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(_of_meters(e.value, names) for e in node.elements)
    if isinstance(node, cst.Dict):
        return all(isinstance(e, cst.DictElement) and _of_meters(e.key, names) and _of_meters(e.value, names) for e in node.elements)
    if isinstance(node, cst.BinaryOperation):
        return _of_meters(node.left, names) and _of_meters(node.right, names)
    return False


def _meters_of_dict(name: str, value: cst.BaseExpression | None, classes: frozenset[str]) -> list[str]:
    """`name['loss']`, `name['iou']` for a dict whose every value is a new meter."""
    if not isinstance(value, cst.Dict) or not value.elements:
        return []
    out = []
    for element in value.elements:
        if not (isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)):
            return []
        if not (isinstance(element.value, cst.Call) and dotted_name(element.value.func) in classes):
            return []
        out.append(f"{name}[{element.key.evaluated_value!r}]")
    return out


def _spelled(node: cst.BaseExpression) -> str | None:
    """`losses` or `self.losses`, or a meter of a dict by its string key (`avg_meters['loss']`)."""
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        index = node.slice[0].slice
        base = dotted_name(node.value)
        if base and isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            return f"{base}[{index.value.evaluated_value!r}]"
        return None
    return dotted_name(node)


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _base(name: str) -> str:
    return name.split("[", 1)[0]


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
    base = _base(name).split(".")[0]
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
