"""Names that hold a prepared model at a given place, for rules about already-migrated code.

The prepare plan (plan.py) says what the migration *will* prepare; this module reads the
`prepare()` calls a script already has. Nothing here edits the tree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from migrator.analysis.roles import Role

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis


def prepared_models(analysis: "ScriptAnalysis") -> dict[str, list[cst.Call]]:
    """Names bound to a prepared model → the prepare() calls that bind them."""
    roles = analysis.roles
    models: dict[str, list[cst.Call]] = {}
    for prepare in analysis.prepare_calls:
        for target, arg in zip(prepare.targets, prepare.args):
            if target and (roles.of(target) is Role.MODEL or roles.of(arg) is Role.MODEL):
                models.setdefault(target, []).append(prepare.call)
    return models


def holds_prepared_model(
    analysis: "ScriptAnalysis", node: cst.CSTNode, name: str, models: dict[str, list[cst.Call]]
) -> bool:
    """Whether `name`, used at `node`, refers to a prepared model: after its prepare() in
    the same function, a module-level prepared name used in a function that does not
    rebind it, or a `self.`/`cls.` attribute prepared anywhere."""
    if not models:
        return False
    scope = analysis.scope_of(node)
    calls = models.get(name)
    if not calls:
        return _handed_prepared_model(analysis, scope, name) or _kept_prepared_model(analysis, scope, name)
    if name.startswith(("self.", "cls.")):
        return True
    line = analysis.position(node).start.line
    for call in calls:
        there = analysis.scope_of(call)
        if there is scope and analysis.position(call).start.line < line:
            return True
        if there is not scope and isinstance(there, cst.Module) and not analysis.binds(scope, name.split(".")[0]):
            return True
    return _handed_prepared_model(analysis, scope, name)


def _handed_prepared_model(analysis: "ScriptAnalysis", scope: cst.CSTNode, name: str) -> bool:
    """`name` is a model parameter of the function `scope`, and the file calls it, every
    call handing it a prepared model (`save_checkpoint(model, ...)` after prepare(); in a
    run of several files, the callers' stub makes the calls the other files make)."""
    from migrator.analysis.device import callers_pass_prepared, prepared_bindings

    facts = analysis.facts
    if not isinstance(scope, cst.FunctionDef) or name not in facts.params.get(id(scope), ()):
        return False
    if analysis.roles.of(name) is not Role.MODEL or id(scope) in facts.method_of:
        return False
    if not any(isinstance(c.node.func, cst.Name) and c.node.func.value == scope.name.value for c in facts.calls):
        return False
    prepared = {t for p in analysis.prepare_calls for t in p.targets if t}
    placed = prepared_bindings(facts, analysis.prepare_calls, analysis.plan, analysis.parent)
    return callers_pass_prepared(facts, scope, name, prepared, placed)


def _kept_prepared_model(analysis: "ScriptAnalysis", scope: cst.CSTNode, name: str) -> bool:
    """`self.model` in a method of a class whose `__init__` only sets it from its parameter
    `model`, every construction of the class in this file handing that a prepared model
    (`Solver(loader, model, optimizer)` after prepare(); in a run of several files, the
    callers' stub makes the other files' constructions)."""
    from migrator.analysis.device import callers_pass_prepared, prepared_bindings

    facts = analysis.facts
    cls = facts.method_of.get(id(scope)) if isinstance(scope, cst.FunctionDef) else None
    if cls is None or not name.startswith("self.") or name.count(".") != 1:
        return False
    init = next((f for f in facts.functions.get("__init__", ()) if facts.method_of.get(id(f)) is cls), None)
    bound = [b for b in facts.bindings if b.name == name and facts.method_of.get(id(b.scope)) is cls]
    if init is None or len(bound) != 1 or bound[0].scope is not init or not isinstance(bound[0].value, cst.Name):
        return False
    param = bound[0].value.value
    if param not in facts.params.get(id(init), ()) or Role.MODEL not in (analysis.roles.of(param), analysis.roles.of(name)):
        return False
    if not any(isinstance(c.node.func, cst.Name) and c.node.func.value == cls.name.value for c in facts.calls):
        return False
    prepared = {t for p in analysis.prepare_calls for t in p.targets if t}
    placed = prepared_bindings(facts, analysis.prepare_calls, analysis.plan, analysis.parent)
    return callers_pass_prepared(facts, init, param, prepared, placed, called_as=cls.name.value)


def accelerator_name_at(analysis: "ScriptAnalysis", node: cst.CSTNode) -> str | None:
    """A name of an existing Accelerator that code at `node` can use (bound in its
    function, a parameter such as `self`, or global), or None."""
    scope = analysis.scope_of(node)
    for name in analysis.accelerator_names:
        head = name.split(".")[0]
        if analysis.binds(scope, head) or analysis.binds(analysis.module, head):
            return name
    return None
