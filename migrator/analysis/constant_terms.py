"""Loss terms that are a constant tensor on some batches.

pytorch-retinanet's FocalLoss appends `torch.tensor(0).float()` to `regression_losses`
for an image without a positive anchor, and the regression itself otherwise. On a batch
where every image takes the constant branch the loss does not depend on the regression
head: its parameters get no gradient, and DistributedDataParallel, which waits for every
parameter's gradient, stops at the next step ("Expected to have finished reduction in the
prior iteration"). Nothing here edits the tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterator

import libcst as cst

from migrator.analysis.names import dotted_name
from migrator.analysis.walk import walk

# a loss or criterion by its name (a function, a class, an attribute): `FocalLoss`, `self.criterion`
LOSS_NAME = re.compile(r"(?i)loss|criterion")
# `torch.tensor(0)`, `torch.zeros(1)`, `x.new_zeros(1)`: a fresh tensor with no graph
_MAKERS = {"tensor", "zeros", "as_tensor", "new_tensor", "new_zeros", "zeros_like", "scalar_tensor"}
# what may follow it and keep it a constant: `.float()`, `.cuda()`, `.to(device)`
_KEEPS = {"float", "double", "half", "cuda", "cpu", "to", "type", "squeeze", "unsqueeze", "view", "reshape", "detach"}


@dataclass(frozen=True, eq=False)
class ConstantTerm:
    """`target` (a list appended to, or a name bound) gets the constant `value` under a test
    in `function`, and something computed elsewhere in it; the function returns it."""

    function: cst.FunctionDef
    target: str
    value: cst.BaseExpression


def constant_terms(
    functions: list[cst.FunctionDef], parent: Callable[[cst.CSTNode], cst.CSTNode | None], owner: Callable[[cst.FunctionDef], str],
) -> Iterator[ConstantTerm]:
    """The terms of loss functions (a function, or a class's method, named for a loss or
    a criterion: `owner(function)` names its class, or "") that are constant on some
    batches. A metric returning a constant for an empty batch trains nothing, and is not
    one."""
    for function in functions:
        if not LOSS_NAME.search(function.name.value) and not LOSS_NAME.search(owner(function)):
            continue
        values: dict[str, list[cst.BaseExpression]] = {}
        for target, value in _contributions(function):
            values.setdefault(target, []).append(value)
        returned = _returned_names(function)
        for target, found in values.items():
            if target not in returned:
                continue
            constants = [v for v in found if _constant(v) and _under_test(v, function, parent)]
            if constants and any(not _constant(v) for v in found):
                yield from (ConstantTerm(function, target, value) for value in constants)  # each site needs the fix


def _contributions(function: cst.FunctionDef) -> list[tuple[str, cst.BaseExpression]]:
    """(`losses`, value) for each `losses.append(value)`, and (`loss`, value) for each
    `loss = value` in the function (not in functions nested in it)."""
    out: list[tuple[str, cst.BaseExpression]] = []

    class _Find(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "append" and len(node.args) == 1:
                name = dotted_name(func.value)
                if name:
                    out.append((name, node.args[0].value))

        def visit_Assign(self, node: cst.Assign) -> None:
            if isinstance(node.value, (cst.List, cst.Tuple, cst.Dict, cst.Integer, cst.Float, cst.Name)):
                return  # `losses = []`, `loss = 0`: where a term starts, not a value of it
            if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                out.append((node.targets[0].target.value, node.value))

    walk(function, _Find())
    return out


def _returned_names(function: cst.FunctionDef) -> set[str]:
    names: set[str] = set()

    class _Find(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Return(self, node: cst.Return) -> None:
            if node.value is not None:
                walk(node.value, _Names())

    class _Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.add(node.value)

    walk(function, _Find())
    return names


def _constant(value: cst.BaseExpression) -> bool:
    """`torch.tensor(0).float().cuda()`: a tensor made from numbers, moved or cast."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _KEEPS:
        value = value.func.value
    if not isinstance(value, cst.Call):
        return False
    name = (dotted_name(value.func) or "").rpartition(".")[2]
    if name not in _MAKERS:
        return False
    return all(isinstance(a.value, (cst.Integer, cst.Float, cst.Name, cst.Attribute, cst.List, cst.Tuple)) or a.keyword is not None for a in value.args)


def _under_test(node: cst.CSTNode, function: cst.FunctionDef, parent) -> bool:
    """`node` sits under an `if` (or an `else`) of `function`: some batches take it."""
    current = parent(node)
    while current is not None and current is not function:
        if isinstance(current, (cst.If, cst.Else, cst.IfExp)):
            return True
        current = parent(current)
    return False
