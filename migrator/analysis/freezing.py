"""What changes which of a model's parameters need a gradient, read with `ast`.

A loop over `parameters()` that sets `p.requires_grad`, or `module.requires_grad_(False)`:
run once the model is wrapped in DistributedDataParallel, it changes the set of
parameters DDP built its gradient buckets from (AM230; project/freezers.py finds the
helpers of other files that do it).
"""

from __future__ import annotations

import ast


def changes_requires_grad(function: ast.AST) -> bool:
    """`for p in module.parameters(): p.requires_grad = False` (or True), or
    `module.requires_grad_(False)`, anywhere in `function`."""
    for node in ast.walk(function):
        if isinstance(node, ast.For) and "parameters(" in ast.unparse(node.iter):
            names = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
            for inner in ast.walk(node):
                if isinstance(inner, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad" and isinstance(t.value, ast.Name) and t.value.id in names
                    for t in inner.targets
                ):
                    return True
        if (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_"
            and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value is False
        ):
            return True
    return False
