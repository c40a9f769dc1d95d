"""Training without a torch.optim optimizer: the hand-written parameter update.

`for p in model.parameters(): p.data.add_(p.grad, alpha=-lr)` (pytorch/examples
word_language_model, regression) updates `model` the way `optimizer.step()` would. The
model it walks is what the Accelerator prepares alone, and where it is built is where
training is set up. Nothing here edits the tree.
"""

from __future__ import annotations

import libcst as cst

from migrator.analysis.collect import Facts
from migrator.analysis.loop import Block, enclosing_block
from migrator.analysis.names import dotted_name
from migrator.analysis.walk import walk

_PARAMETER_METHODS = {"parameters", "named_parameters"}


def hand_updated_models(facts: Facts) -> list[str]:
    """Names whose parameters a loop updates in place from their own `.grad`, in order."""
    found: list[str] = []
    for loop in facts.loops:
        owner, param = _parameter_loop(loop.node)
        if owner is not None and param is not None and owner not in found and _updates_from_grad(loop.node.body, param):
            found.append(owner)
    return found


def _parameter_loop(node: cst.For) -> tuple[str | None, str | None]:
    """(`model`, `p`) for `for p in model.parameters()` / `for name, p in model.named_parameters()`."""
    it = node.iter
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in _PARAMETER_METHODS):
        return None, None
    owner = dotted_name(it.func.value)
    target = node.target
    if it.func.attr.value == "named_parameters":
        if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
            return None, None
        target = target.elements[1].value
    return (owner, target.value) if isinstance(target, cst.Name) else (None, None)


def _updates_from_grad(body: cst.CSTNode, param: str) -> bool:
    """The body reads `param.grad` and changes `param` (or `param.data`) in place:
    `param.data.add_(...)`, `param.sub_(...)`, `param.data -= ...`."""
    reads_grad = changes = False

    class _Find(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            nonlocal reads_grad
            if node.attr.value == "grad" and dotted_name(node.value) in (param, f"{param}.data"):
                reads_grad = True

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal changes
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value.endswith("_") and not func.attr.value.startswith("_"):
                if dotted_name(func.value) in (param, f"{param}.data"):
                    changes = True

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            nonlocal changes
            if dotted_name(node.target) in (param, f"{param}.data"):
                changes = True

    walk(body, _Find())
    return reads_grad and changes


def hand_update_block(facts: Facts, models: list[str], parent) -> Block | None:
    """Where training is set up when no optimizer is: the block that builds the first
    hand-updated model (its first assignment)."""
    for name in models:
        for b in facts.bindings:
            if b.name == name and b.value is not None:
                block = enclosing_block(b.statement, parent)
                if block is not None:
                    return block
    return None
