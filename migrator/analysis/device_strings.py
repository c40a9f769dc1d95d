"""Uses of a device variable that only work while it holds a string.

`device = "cuda" if torch.cuda.is_available() else "cpu"` becomes `device =
accelerator.device`, a `torch.device`. A torch.device never equals a string
(`device == "cuda"` turns False), has no `startswith`, cannot be searched with `in`, and
`torch.autocast(device_type=device)` wants the type string. Each such use is found here
with what it should read instead: `device.type` where the string named a device type,
`str(device)` where it was searched or sliced as text. Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import libcst as cst

from migrator.analysis.collect import Facts

_STRING_METHODS = {
    "startswith", "endswith", "split", "rsplit", "lower", "upper", "replace", "strip", "partition", "find", "index",
}
_TYPE_TAKERS = {"autocast", "GradScaler"}  # torch.autocast("cuda"), torch.amp.GradScaler("cuda")


@dataclass(frozen=True, eq=False)
class StringUse:
    """`node` (a load of the device variable) should read `node.type` ("type") or
    `str(node)` ("str")."""

    node: cst.Name
    kind: Literal["type", "str"]


def string_valued(value: cst.BaseExpression | None) -> bool:
    """The device variable held a string: `"cuda"`, `"cuda" if ... else "cpu"`, `args.device`."""
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(value, cst.IfExp):
        return string_valued(value.body) or string_valued(value.orelse)
    return isinstance(value, cst.Attribute) and value.attr.value == "device"


def string_uses(facts: Facts, name: str, scope: cst.CSTNode, parent: Callable) -> list[StringUse]:
    """The string-only uses of `name` bound in `scope` (in functions that see it too,
    when it is a module-level name they do not bind)."""
    out = []
    for load in facts.loads:
        if load.name != name or not _sees(facts, load.scope, scope, name):
            continue
        kind = _kind(load.node, parent)
        if kind is not None:
            out.append(StringUse(load.node, kind))
    return out


def _sees(facts: Facts, where: cst.CSTNode, scope: cst.CSTNode, name: str) -> bool:
    if where is scope:
        return True
    if not isinstance(scope, cst.Module) or not isinstance(where, cst.FunctionDef):
        return False
    if name in facts.params.get(id(where), ()):
        return False
    return not any(b.scope is where and b.name == name for b in facts.bindings)


def _kind(node: cst.Name, parent: Callable) -> Literal["type", "str"] | None:
    up = parent(node)
    if isinstance(up, cst.Comparison) and up.left is node:
        return _compared(up.comparisons[0] if len(up.comparisons) == 1 else None, node)
    if isinstance(up, cst.ComparisonTarget) and up.comparator is node:
        comparison = parent(up)
        if isinstance(up.operator, (cst.In, cst.NotIn)):
            return "str"
        if isinstance(comparison, cst.Comparison) and len(comparison.comparisons) == 1:
            return _literal_kind(comparison.left)
        return None
    if isinstance(up, cst.Attribute) and up.value is node and up.attr.value in _STRING_METHODS:
        return "str"
    if isinstance(up, cst.Subscript) and up.value is node:
        return "str"
    if isinstance(up, cst.Arg) and up.value is node:
        call = parent(up)
        if up.keyword is not None:
            return "type" if up.keyword.value == "device_type" else None
        if isinstance(call, cst.Call) and call.args and call.args[0] is up:
            func = call.func
            last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            return "type" if last in _TYPE_TAKERS else None
        return None
    if isinstance(up, cst.Assign) and up.value is node and len(up.targets) == 1:
        target = up.targets[0].target
        if isinstance(target, cst.Name) and target.value.endswith("device_type"):
            return "type"
    return None


def _compared(target: cst.ComparisonTarget | None, node: cst.Name) -> Literal["type", "str"] | None:
    if target is None:
        return None
    if isinstance(target.operator, (cst.In, cst.NotIn)):
        # `device in ("cuda", "mps")`: a torch.device is never one of those strings
        items = target.comparator
        if isinstance(items, (cst.Tuple, cst.List, cst.Set)) and items.elements:
            kinds = {_literal_kind(e.value) for e in items.elements}
            return kinds.pop() if len(kinds) == 1 else None
        return None
    if isinstance(target.operator, (cst.Equal, cst.NotEqual)):
        return _literal_kind(target.comparator)
    return None


def _literal_kind(other: cst.BaseExpression) -> Literal["type", "str"] | None:
    """Compared with "cuda": the type; with "cuda:1": the whole text."""
    if isinstance(other, cst.SimpleString):
        return "str" if ":" in str(other.evaluated_value) else "type"
    return None
