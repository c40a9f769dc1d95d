"""A count of the training data taken from the object that serves the loader.

lidar-bonnetal's Trainer sizes its warm-up schedule with `steps_per_epoch =
self.parser.get_train_size()`, and trains on `train_loader=self.parser.get_train_set()`,
the scheduler handed to `train_epoch` and stepped once per batch there. Once that loader
is prepared, each process runs 1/N of its batches per epoch, but the count still says all
of them: the warm-up lasts N times as many epochs (reader R6, 28th session). Not a
`len(loader)` AM104 can see: the count comes from the object beside the loader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from migrator.analysis.names import dotted_name
from migrator.analysis.roles import Role

# a method that counts: get_train_size, num_batches, len_train, steps_per_epoch ...
_COUNTS = re.compile(r"size|len|count|num|steps|batches|iters", re.IGNORECASE)


@dataclass(frozen=True)
class ServedCount:
    count: cst.Call  # self.parser.get_train_size()
    loader: cst.Call  # self.parser.get_train_set(): what the training loop draws from
    scheduler: str  # self.scheduler: stepped once per batch


def served_counts(analysis) -> list[ServedCount]:
    facts = analysis.facts
    loaders = _served_loaders(analysis)
    if not loaders:
        return []
    out = []
    for scheduler in _stepped_per_batch(analysis):
        for b in facts.bindings:
            if b.name != scheduler or not isinstance(b.value, cst.Call):
                continue
            for call in _calls_feeding(analysis, b.value, b.scope, depth=3):
                func = call.func
                if not (isinstance(func, cst.Attribute) and not call.args and _COUNTS.search(func.attr.value)):
                    continue
                server = dotted_name(func.value)
                loader = next((l for s, m, l in loaders if s == server and m != func.attr.value), None)
                if loader is not None:
                    out.append(ServedCount(call, loader, scheduler))
    return out


def _served_loaders(analysis) -> list[tuple[str, str, cst.Call]]:
    """(object, method, call) of each `obj.method(...)` whose value is a training loader:
    bound to a name with that role, or handed to a parameter with it."""
    facts, roles = analysis.facts, analysis.roles
    out = []
    for c in facts.calls:
        for arg in c.node.args:
            value = arg.value
            if arg.keyword is None or roles.of(arg.keyword.value) is not Role.DATALOADER:
                continue
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and dotted_name(value.func.value):
                out.append((dotted_name(value.func.value), value.func.attr.value, value))
    for b in facts.bindings:
        value = b.value
        if b.element is None and roles.of(b.name) is Role.DATALOADER and isinstance(value, cst.Call) \
                and isinstance(value.func, cst.Attribute) and dotted_name(value.func.value):
            out.append((dotted_name(value.func.value), value.func.attr.value, value))
    return out


def _stepped_per_batch(analysis) -> set[str]:
    """Schedulers whose `.step()` runs in a loop over a loader, by the names they are built
    under: a parameter stepped there is followed to what the calls hand it (`scheduler=self.scheduler`)."""
    facts, roles = analysis.facts, analysis.roles
    stepped = set()
    for c in facts.calls:
        func = c.node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "step" and c.loops):
            continue
        name = dotted_name(func.value) or ""
        if roles.of(name) is Role.SCHEDULER or "sched" in name.lower():
            if any(roles.of(l.iter.value) is Role.DATALOADER for l in c.loops if isinstance(l.iter, cst.Name)) \
                    or any(_loops_over_loader(analysis, l) for l in c.loops):
                stepped.add(name)
    handed = set()
    for c in facts.calls:
        for arg in c.node.args:
            if arg.keyword is not None and arg.keyword.value in stepped and dotted_name(arg.value):
                handed.add(dotted_name(arg.value))
    return stepped | handed


def _loops_over_loader(analysis, loop: cst.For) -> bool:
    """`for i, batch in enumerate(train_loader)`: the loop draws from a loader."""
    source = loop.iter
    while isinstance(source, cst.Call) and source.args and dotted_name(source.func) in ("enumerate", "tqdm", "tqdm.tqdm", "iter"):
        source = source.args[0].value
    return analysis.roles.of(dotted_name(source) or "") is Role.DATALOADER


def _calls_feeding(analysis, expr: cst.CSTNode, scope, depth: int) -> list[cst.Call]:
    """The calls in `expr`, and in what the names it reads were last bound to in `scope`
    (`up_steps = int(wup * steps_per_epoch)`, `steps_per_epoch = obj.size()`)."""
    calls = [n for n in analysis.nodes_under(expr, "Call")]
    if depth == 0:
        return calls
    names = {n.value for n in analysis.nodes_under(expr, "Name")}
    for b in analysis.facts.bindings:
        if b.name in names and b.scope is scope and b.value is not None and b.value is not expr:
            calls += _calls_feeding(analysis, b.value, scope, depth - 1)
    return calls
