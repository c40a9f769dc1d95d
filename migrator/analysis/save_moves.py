"""A prepared model moved off its device, or to another dtype, only to be saved.

`model.eval().cpu()`, then `torch.save(model.state_dict(), path)`, then
`model.to(device).train()`: a single-device script writes a CPU (or float16) checkpoint
this way. After prepare() the model is wrapped in DistributedDataParallel, whose hooks
and buckets hold its parameters where they were: moving them and back breaks the
gradient sync with no error. The same checkpoint comes from a converted copy of the state
dict, with the model left where it is. Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from migrator.analysis.names import dotted_name
from migrator.analysis.roles import Role
from migrator.analysis.walk import walk

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis

_DTYPES = ("half", "double", "bfloat16", "float")
_KEEP = {"eval", "train", "requires_grad_"}  # return the module itself and move nothing
_BACK = {"to", "cuda", *_DTYPES}
_LOOPS = (cst.For, cst.While)


@dataclass(frozen=True, eq=False)
class SaveMove:
    """`off` (`.cpu()`, `.to("cpu")`, `.half()`, ...) in the statement `off_line` moves
    prepared model `model` only for the save whose `model.state_dict()` calls are
    `states`; `back` is the call in `back_line` that moves it back (None when nothing
    uses the model after the save). `convert` is the tensor method that gives the saved
    copy: "cpu", "half", "double", "bfloat16" or "float"."""

    model: str
    off: cst.Call
    off_line: cst.SimpleStatementLine
    states: tuple[cst.Call, ...]
    back: cst.Call | None
    back_line: cst.SimpleStatementLine | None
    convert: str


def save_moves(analysis: "ScriptAnalysis") -> tuple[SaveMove, ...]:
    out = []
    for node in analysis.nodes("SimpleStatementLine"):
        found = _save_move(analysis, node)
        if found is not None:
            out.append(found)
    return tuple(out)


def moved_off(line: cst.CSTNode) -> tuple[str | None, cst.Call | None, str | None]:
    """(model, the off-device call, the conversion) of `model.eval().cpu()` alone on its
    line; (None, None, None) when the line is not one such chain."""
    root, calls = _chain(line)
    offs = [(c, kind) for c in calls if (kind := _off_kind(c)) is not None]
    if root is None or len(offs) != 1 or any(c.func.attr.value not in _KEEP for c in calls if c is not offs[0][0]):
        return None, None, None
    return root, offs[0][0], offs[0][1]


def _save_move(analysis: "ScriptAnalysis", line: cst.SimpleStatementLine) -> SaveMove | None:
    model, off, convert = moved_off(line)
    if model is None or model not in analysis.prepared or analysis.roles.of(model) is not Role.MODEL:
        return None
    block = analysis.parent(line)
    body = list(getattr(block, "body", ()))
    index = next(i for i, s in enumerate(body) if s is line)
    later = [(s, uses) for s in body[index + 1 :] if (uses := _uses(s, model))]
    if not later:
        return None
    save, uses = later[0]
    states = _saved_states(analysis, save, uses)
    if states is None:
        return None
    if len(later) > 1:
        back_line, _ = later[1]
        back = _moved_back(back_line, model, off)
        if back is None:
            return None
        return SaveMove(model, off, line, states, back, back_line, convert)
    if not _last_use(analysis, line, save, model):
        return None
    return SaveMove(model, off, line, states, None, None, convert)


def _chain(line: cst.CSTNode) -> tuple[str | None, list[cst.Call]]:
    """`model` and the calls of `model.a().b()` (outermost first), alone on a line."""
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 or not isinstance(line.body[0], cst.Expr):
        return None, []
    expr = line.body[0].value
    calls = []
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        calls.append(expr)
        expr = expr.func.value
    return (dotted_name(expr) if calls else None), calls


def _off_kind(call: cst.Call) -> str | None:
    method = call.func.attr.value  # type: ignore[attr-defined]
    if method == "cpu" and not call.args:
        return "cpu"
    if method == "to" and len(call.args) == 1 and call.args[0].keyword is None:
        value = call.args[0].value
        if isinstance(value, cst.SimpleString) and value.evaluated_value == "cpu":
            return "cpu"
    if method in _DTYPES and method != "float" and not call.args:
        return method
    return None


def _uses(statement: cst.CSTNode, model: str) -> list[cst.BaseExpression]:
    """Every expression naming `model` in `statement` (outermost: `self.model`, not `self`)."""
    found: list[cst.BaseExpression] = []

    class _Find(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            if dotted_name(node) == model:
                found.append(node)
                return False
            return True

        def visit_Name(self, node: cst.Name) -> None:
            if node.value == model:
                found.append(node)

    walk(statement, _Find())
    return found


def _saved_states(analysis: "ScriptAnalysis", statement: cst.CSTNode, uses) -> tuple[cst.Call, ...] | None:
    """The `model.state_dict()` calls (or `accelerator.unwrap_model(model).state_dict()`,
    once AM510 has run) in the arguments of a save in `statement`, when they are the
    statement's only uses of the model; None otherwise."""
    saves = [n for n in _calls(statement) if _is_save(analysis, n)]
    states = []
    for use in uses:
        receiver = use
        up = analysis.parent(analysis.parent(use))
        if isinstance(up, cst.Call) and (dotted_name(up.func) or "").endswith(".unwrap_model") and len(up.args) == 1:
            receiver = up
        call = analysis.parent(analysis.parent(receiver))
        if not (
            isinstance(call, cst.Call) and not call.args and call.func is analysis.parent(receiver)
            and isinstance(call.func, cst.Attribute) and call.func.attr.value == "state_dict"
            and any(_inside(analysis, call, s) for s in saves)
        ):
            return None
        states.append(call)
    return tuple(states)


def _is_save(analysis: "ScriptAnalysis", call: cst.Call) -> bool:
    """`torch.save(...)`, or `accelerator.save(...)` once AM510 has rewritten it."""
    if analysis.imports.qualify(call.func) == "torch.save":
        return True
    name = dotted_name(call.func) or ""
    return name.endswith(".save") and name[: -len(".save")] in analysis.accelerator_names


def _calls(statement: cst.CSTNode) -> list[cst.Call]:
    found: list[cst.Call] = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

    walk(statement, _Find())
    return found


def _inside(analysis: "ScriptAnalysis", node: cst.CSTNode, outer: cst.CSTNode) -> bool:
    current = analysis.parent(node)
    while current is not None:
        if current is outer:
            return True
        current = analysis.parent(current)
    return False


def _moved_back(line: cst.CSTNode, model: str, off: cst.Call) -> cst.Call | None:
    """The one move of `model.to(device).train()` alone on its line."""
    root, calls = _chain(line)
    moves = [c for c in calls if c.func.attr.value in _BACK]  # type: ignore[attr-defined]
    if root != model or len(moves) != 1 or _off_kind(moves[0]) == _off_kind(off):
        return None
    if any(c.func.attr.value not in _KEEP for c in calls if c is not moves[0]):  # type: ignore[attr-defined]
        return None
    return moves[0]


def _last_use(analysis: "ScriptAnalysis", line: cst.CSTNode, save: cst.CSTNode, model: str) -> bool:
    """Nothing uses the model after the save: no loop runs the code again, no later load
    in its scope, and, at module level, no function reads it."""
    if "." in model:
        return False  # `self.model`: other methods may use it later
    scope = analysis.scope_of(line)
    current = analysis.parent(line)
    while current is not None and current is not scope:
        if isinstance(current, _LOOPS):
            return False
        current = analysis.parent(current)
    end = analysis.order(save)
    root = model.split(".")[0]
    for load in analysis.facts.loads:
        if load.name != root and load.name != model:
            continue
        if load.scope is scope and analysis.order(load.node) > end and not _inside(analysis, load.node, save):
            return False
        if isinstance(scope, cst.Module) and load.scope is not scope:
            return False
    return True
