"""`torch.save` in a training script: what it saves, what to unwrap, and where every
process can wait for the others before the main process writes.

Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from migrator.analysis.loop import is_main_guard
from migrator.analysis.names import dotted_name
from migrator.analysis.roles import Role

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis

_SAVES = {"torch.save"}
_BLOCK_OWNERS = (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Try, cst.Module)


@dataclass(frozen=True, eq=False)
class Save:
    """`torch.save(obj, f)`: `models` are the expressions of models saved whole or through
    `.state_dict()`, which must be unwrapped (also at the call sites of a helper that
    saves its parameter: `save_checkpoint({"state_dict": model.state_dict()}, ...)`);
    `anchor` is the statement before which `wait_for_everyone()` goes (None: nowhere
    safe, e.g. only the main process runs this code, or a helper called from several
    places)."""

    call: cst.Call
    models: tuple[cst.BaseExpression, ...]
    anchor: cst.BaseStatement | None


def saves(analysis: "ScriptAnalysis") -> tuple[Save, ...]:
    out = []
    for c in analysis.facts.calls:
        if c.qualified not in _SAVES or not c.node.args:
            continue
        if len(c.node.args) > 1 and _per_process(c.node.args[1].value):
            continue  # a file per process (`f"preds_{rank}.pt"`): every process writes its own
        obj = c.node.args[0].value
        models = list(_models_in(analysis, obj))
        anchor = barrier_anchor(analysis, c.node)
        sites = _helper_call_sites(analysis, c.scope, obj)
        if sites is not None:
            anchor = barrier_anchor(analysis, sites[0][0]) if len(sites) == 1 else None
            for _, arg in sites:
                models += _models_in(analysis, arg)
        out.append(Save(c.node, tuple(models), anchor))
    return tuple(out)


_PER_PROCESS = ("rank", "process_index", "local_process_index")


def _per_process(path: cst.BaseExpression) -> bool:
    text = cst.Module([]).code_for_node(path)
    return any(word in text for word in _PER_PROCESS)


def _helper_call_sites(analysis: "ScriptAnalysis", scope, obj: cst.BaseExpression):
    """For `def save_checkpoint(state, ...): torch.save(state, ...)`, every call of the
    helper in this file with the argument that becomes `state`; None when the saved object
    is not a parameter of a plain function."""
    facts = analysis.facts
    if not (isinstance(scope, cst.FunctionDef) and isinstance(obj, cst.Name)) or id(scope) in facts.method_of:
        return None
    params = scope.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    if obj.value not in positional and obj.value not in [p.name.value for p in params.kwonly_params]:
        return None
    index = positional.index(obj.value) if obj.value in positional else None
    sites = []
    for c in facts.calls:
        if not (isinstance(c.node.func, cst.Name) and c.node.func.value == scope.name.value):
            continue
        arg = next((a.value for a in c.node.args if a.keyword is not None and a.keyword.value == obj.value), None)
        if arg is None and index is not None and index < len(c.node.args) and c.node.args[index].keyword is None:
            arg = c.node.args[index].value
        if arg is not None:
            sites.append((c.node, arg))
    return sites or None


def _models_in(analysis: "ScriptAnalysis", obj: cst.BaseExpression) -> tuple[cst.BaseExpression, ...]:
    """`model` in `model.state_dict()`, or `model` saved whole (not `.module`: AM211 and
    AM204 rewrite that)."""
    found: list[cst.BaseExpression] = []
    roles = analysis.roles

    def is_model(expr: cst.BaseExpression) -> bool:
        return isinstance(expr, (cst.Name, cst.Attribute)) and roles.of(dotted_name(expr)) is Role.MODEL

    if is_model(obj):
        return (obj,)

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "state_dict" and is_model(func.value):
                found.append(func.value)

    obj.visit(_Find())
    return tuple(found)


def barrier_anchor(analysis: "ScriptAnalysis", node: cst.CSTNode) -> cst.BaseStatement | None:
    """The statement every process reaches before `node` runs: `node`'s statement line,
    lifted out of every enclosing `if` up to the innermost loop or function body (a test
    that differs between processes must not hold a barrier). None when only the main
    process runs the code (a barrier there would wait forever)."""
    branches = analysis.branches
    branch = branches.branch_of(node)
    if branch is not None and branch.kind in ("guard", "decorator"):
        return None
    if branch is None and branches.runs_only_on_main(node):
        return None
    current = analysis.line_of(node)
    anchor = current
    while current is not None:
        up = analysis.parent(current)
        if up is None or isinstance(up, _BLOCK_OWNERS) or is_main_guard(up):
            break
        if isinstance(up, cst.If) and isinstance(analysis.parent(up), (cst.IndentedBlock, cst.Module)):
            anchor = up
        current = up
    return anchor  # type: ignore[return-value]
