"""What changes which parts of a model need a gradient, read with `ast`.

A loop over a part's `parameters()` that sets `p.requires_grad` (`for p in
model.backbone.parameters()`, or `module.parameters()` for each `module` a loop over
`named_children()` hands out), or `model.backbone.requires_grad_(False)`. Run once a model
is wrapped in DistributedDataParallel, freezing part of it stops the next step (DDP waits
for the gradients of the frozen part) unless the wrap looks for unused parameters, and a
part frozen at the wrap and opened later is never averaged (AM230; project/freezers.py
finds the helpers of other files that do it). A whole model frozen and opened again (a
GAN's discriminator during the generator's step) is none of these: DDP handles it.
"""

from __future__ import annotations

import ast

# calls that hand out a model's parts
PART_WALKS = ("children", "modules", "named_children", "named_modules")


def changes_part_requires_grad(function: ast.AST) -> bool:
    """`function` sets `requires_grad` on a part of a model (see the module's docstring)."""
    parts = _part_variables(function)
    for node in ast.walk(function):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and _method(node.iter) == "parameters":
            owner = node.iter.func.value  # type: ignore[attr-defined]
            if _is_part(owner, parts) and _sets_requires_grad(node):
                return True
        if isinstance(node, ast.Call) and _method(node) == "requires_grad_" and _false(node) and _is_part(node.func.value, parts):  # type: ignore[attr-defined]
            return True
    return False


def _method(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _false(call: ast.Call) -> bool:
    return bool(call.args) and isinstance(call.args[0], ast.Constant) and call.args[0].value is False


def _part_variables(function: ast.AST) -> set[str]:
    """Names a loop binds to a model's parts (`for name, module in model.named_children()`)."""
    out = set()
    for node in ast.walk(function):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and _method(node.iter) in PART_WALKS:
            out |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return out


def _is_part(owner: ast.expr, parts: set[str]) -> bool:
    """`model.backbone`, `model[0]`, `self.model.backbone`, or a part a loop hands out; not
    a whole model (`model`, `self.netD`) nor a copy (`copy.deepcopy(model)`)."""
    steps, node = 0, owner
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        steps, node = steps + 1, node.value
    if not isinstance(node, ast.Name):
        return False
    return node.id in parts if steps == 0 else steps > (1 if node.id == "self" else 0)


def _sets_requires_grad(loop: ast.For) -> bool:
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    return any(
        isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == "requires_grad" and isinstance(t.value, ast.Name) and t.value.id in names
            for t in node.targets
        )
        for node in ast.walk(loop)
    )
