"""Loader parameters that every caller in the file hands a loader it has not prepared.

A function that iterates a loader parameter is read as an evaluation of the caller's
prepared loader, so its sums get gathered across processes. That is wrong where each
call passes a loader that is not prepared at that point: `class_weights(train_loader)`
counting the labels before the `prepare()` that shards `train_loader`, or a helper
handed a loader its caller builds for itself and never prepares. Such a function reads
the whole data set on every process: nothing in it needs gathering, and gathering its
batches would count each one N times. Nothing here edits the tree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

import libcst as cst

from migrator.analysis.collect import CallFact, Facts
from migrator.analysis.roles import Role, RoleTable

if TYPE_CHECKING:
    from migrator.analysis import PrepareCall
    from migrator.analysis.plan import PreparePlan

_PREPARES = ("prepare", "prepare_data_loader")


def loaders_fed_whole(
    facts: Facts, roles: RoleTable, prepare_calls: Iterable["PrepareCall"], plan: "PreparePlan | None", parent: Callable,
    called_elsewhere: frozenset[str] = frozenset(),
) -> frozenset[tuple[int, str]]:
    """(id(function), parameter) for each loader parameter of a module-level function (or
    class constructor) that the file calls, every call handing it a name its own scope binds, with a call,
    and has not prepared by then (the plan's prepare() not inserted yet, an existing one
    further down). A parameter any call passes otherwise (an expression, a parameter of
    the caller, a prepared name) is not in it: its loader may be prepared; nor is one of a
    function `called_elsewhere` (by other files of the run) unless the callers' stub calls
    it here (what those files hand it is then among the calls)."""
    prepares = list(prepare_calls)
    by_callee: dict[str, list[CallFact]] = {}
    for c in facts.calls:
        if c.func is not None:
            by_callee.setdefault(c.func, []).append(c)
    out = set()
    for name, function, params in _callables(facts):
        calls = by_callee.get(name, [])
        if not calls or name in called_elsewhere and not any(_in_stub(c) for c in calls):
            continue
        for param in params:
            if roles.of(param) is not Role.DATALOADER:
                continue
            if all(_whole_at(c, _argument(c.node, params, param), facts, prepares, plan, parent) for c in calls):
                out.add((id(function), param))
    return frozenset(out)


def _callables(facts: Facts):
    """(name, function, parameters as a call passes them): the module-level functions, and
    the `__init__` of each module-level class (an evaluator class keeps its loader in
    `self.data_loader`: metrics.sharded_loop follows it back to this parameter)."""
    for name, defs in facts.functions.items():
        if len(defs) == 1 and id(defs[0]) not in facts.method_of and isinstance(facts.scope_of_function.get(id(defs[0])), cst.Module):
            yield name, defs[0], facts.params.get(id(defs[0]), ())
    for name, cls in facts.classes.items():
        init = next((f for f in facts.functions.get("__init__", []) if facts.method_of.get(id(f)) is cls), None)
        if init is not None:
            yield name, init, facts.params.get(id(init), ())[1:]


def _argument(call: cst.Call, params: tuple[str, ...], param: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    index = params.index(param)
    return positional[index].value if index < len(positional) else None


def _whole_at(call: CallFact, value: cst.BaseExpression | None, facts: Facts, prepares, plan, parent) -> bool:
    """`value`, passed at `call`, names a loader of the call's scope that is not prepared there."""
    if not isinstance(value, cst.Name):
        return False
    name, scope = value.value, call.scope
    if isinstance(scope, cst.FunctionDef) and name in facts.params.get(id(scope), ()):
        return False  # the caller's own caller decides
    at = facts.order.get(call.node, 0)
    bindings = [b for b in facts.bindings if b.name == name and b.scope is scope and facts.order.get(b.statement, 0) < at]
    if not bindings or not all(isinstance(b.value, cst.Call) and not _is_prepare(b.value) for b in bindings):
        return False  # bound by something else first (an alias, a prepare())
    for p in prepares:
        if name in p.targets and _scope_of(p.call, parent) is scope and facts.order.get(p.call, 0) < at:
            return False
    if plan is not None and plan.block.scope is scope:
        index = plan.block.index_of(call.node, parent)
        for group in plan.groups:
            if name not in group.names:
                continue
            after = plan.block.index_of(group.after, parent)  # the block's statement holding it
            nested = all(s is not group.after for s in plan.block.body)  # a prepare() in a branch
            if index is None or after is None or index > after or (nested and index == after):
                return False
    return True


def _in_stub(call: CallFact) -> bool:
    from migrator.analysis.reach import CALLERS_STUB

    return isinstance(call.scope, cst.FunctionDef) and call.scope.name.value == CALLERS_STUB


def _is_prepare(value: cst.Call) -> bool:
    func = value.func
    return isinstance(func, cst.Attribute) and func.attr.value in _PREPARES


def _scope_of(node: cst.CSTNode, parent: Callable) -> cst.CSTNode | None:
    current = parent(node)
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        current = parent(current)
    return current

