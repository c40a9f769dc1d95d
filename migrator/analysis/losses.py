"""Which values of an evaluation loop are 0-d losses, and how they add up across processes.

`loss = criterion(logits, labels)` is one number per batch: gathering it gives N numbers
(and `.item()` fails), so it is averaged ("mean") or summed ("sum", when the criterion
sums) across processes instead. Nothing here edits the tree.
"""

from __future__ import annotations

import re

import libcst as cst

from migrator.analysis.collect import Facts
from migrator.analysis.names import dotted_name

_LOSS_NAME = re.compile(r"loss|criterion", re.IGNORECASE)


def loss_modules(facts: Facts) -> dict[str, str]:
    """Loss modules by name, with their reduction: `criterion = nn.CrossEntropyLoss()`."""
    out = {}
    for b in facts.bindings:
        value = b.value
        if isinstance(value, cst.Call):
            qualified = facts.imports.qualify(value.func) or dotted_name(value.func) or ""
            if qualified.endswith("Loss"):
                out[b.name] = reduction_of(value) or "mean"
    return out


def reduction_of(call: cst.Call) -> str | None:
    """The `reduction=` a loss call or constructor names (`size_average=False` is "sum")."""
    for arg in call.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword == "reduction" and isinstance(arg.value, cst.SimpleString):
            return arg.value.evaluated_value if isinstance(arg.value.evaluated_value, str) else None
        if keyword == "size_average" and isinstance(arg.value, cst.Name) and arg.value.value == "False":
            return "sum"
    return None


def loss_reduction(value: cst.BaseExpression, criteria: dict[str, str]) -> str | None:
    """"mean"/"sum" when `value` computes a 0-d loss: a loss module or function called
    (`criterion(out, y)`, `F.cross_entropy(out, y)`), or a model output's `.loss`; None for
    anything else, and for `reduction="none"` (per-sample values are gathered)."""
    if isinstance(value, cst.Attribute) and value.attr.value == "loss":
        return "mean"
    if not isinstance(value, cst.Call):
        return None
    callee = dotted_name(value.func) or ""
    if callee in criteria:
        reduction = reduction_of(value) or criteria[callee]
    elif _LOSS_NAME.search(callee.rsplit(".", 1)[-1]) or callee.rsplit(".", 1)[-1] in {"cross_entropy", "binary_cross_entropy"}:
        reduction = reduction_of(value) or "mean"
    else:
        return None
    return reduction if reduction in ("mean", "sum") else None
