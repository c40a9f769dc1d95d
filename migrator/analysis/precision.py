"""Mixed precision written by hand: `autocast(...)` regions and `GradScaler`s.

Reads which precision the script asks for (the `mixed_precision` the Accelerator needs)
from the autocast calls, and sorts every use of a scaler into what the Accelerator does
itself (`scale(loss).backward()`, `step`, `update`, `unscale_`) and what a human must
look at (its state in checkpoints). Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrator.analysis.apex import ApexAmp, apex_amp
from migrator.analysis.collect import Binding, Facts
from migrator.analysis.names import dotted_name

AUTOCASTS = {
    "torch.autocast": "device",
    "torch.amp.autocast": "device",
    "torch.amp.autocast_mode.autocast": "device",
    "torch.cuda.amp.autocast": "cuda",
    "torch.cuda.amp.autocast_mode.autocast": "cuda",
    "torch.cpu.amp.autocast": "cpu",
}
SCALERS = {
    "torch.cuda.amp.GradScaler",
    "torch.cuda.amp.grad_scaler.GradScaler",
    "torch.amp.GradScaler",
    "torch.amp.grad_scaler.GradScaler",
    "torch.GradScaler",
}
_DTYPES = {
    "torch.float16": "fp16", "torch.half": "fp16", "torch.bfloat16": "bf16",
    "torch.float32": "no", "torch.float": "no",
}
# Scaler methods the Accelerator takes over, and what becomes of them.
SCALER_METHODS = {"scale", "step", "update", "unscale_"}


@dataclass(frozen=True, eq=False)
class Autocast:
    """One `autocast(...)` call used as a context manager (`with autocast():`).

    `value` is the code of the `mixed_precision` it asks for (`"fp16"`,
    `"fp16" if args.amp else "no"`), None when it cannot be read (`reason` says why).
    `disabled` marks `autocast(enabled=False)`: a full-precision region that stays.
    """

    call: cst.Call
    value: str | None
    disabled: bool = False
    reason: str | None = None


@dataclass(frozen=True, eq=False)
class ScalerUse:
    """A use of a scaler: `kind` is a SCALER_METHODS name, "state" (state_dict,
    load_state_dict: checkpoints) or "other" (passed along, read)."""

    node: cst.CSTNode
    kind: str
    call: cst.Call | None = None


@dataclass(frozen=True, eq=False)
class Scaler:
    """`name = GradScaler(...)` and every use of `name` in the file."""

    name: str
    binding: Binding
    uses: tuple[ScalerUse, ...]
    value: str | None  # mixed_precision implied by the scaler alone

    @property
    def kept(self) -> bool:
        """The binding must stay: something other than the replaced methods uses it."""
        return any(u.kind not in SCALER_METHODS for u in self.uses)


@dataclass(frozen=True, eq=False)
class PrecisionFacts:
    autocasts: tuple[Autocast, ...]
    scalers: tuple[Scaler, ...]
    indirect: tuple[cst.CSTNode, ...]  # autocast named but not called in a `with` (partial(...), aliases)
    value: str | None  # the one mixed_precision the script asks for
    conflict: str | None  # why no single value exists
    apex: ApexAmp | None = None  # NVIDIA apex.amp (apex.py)

    @property
    def wanted(self) -> bool:
        return bool(self.autocasts or self.scalers or self.apex)


def _kwarg(call: cst.Call, name: str, position: int | None) -> cst.BaseExpression | None:
    for i, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
        if arg.keyword is None and arg.star == "" and position is not None and i == position:
            return arg.value
    return None


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).strip()


def _quoted(choice: str) -> str:
    return f'"{choice}"'


class _DtypeReader:
    """`torch.bfloat16` → `"bf16"`; a ternary of dtypes → a ternary of choices; a name
    bound once to either → what it is bound to."""

    def __init__(self, facts: Facts) -> None:
        self.facts = facts

    def read(self, expr: cst.BaseExpression, depth: int = 0) -> str | None:
        qualified = self.facts.imports.qualify(expr)
        if qualified in _DTYPES:
            return _quoted(_DTYPES[qualified])
        if isinstance(expr, cst.IfExp):
            body, orelse = self.read(expr.body, depth), self.read(expr.orelse, depth)
            if body is None or orelse is None:
                return None
            return body if body == orelse else f"{body} if {_code(expr.test)} else {orelse}"
        name = dotted_name(expr)
        if name and depth < 3:
            bound = [b for b in self.facts.bindings if b.name == name and b.value is not None]
            if len(bound) == 1:
                value = bound[0].element if bound[0].element is not None else bound[0].value
                return self.read(value, depth + 1)
        return None


def _autocast(call: cst.Call, kind: str, reader: _DtypeReader) -> Autocast:
    if kind == "device":
        device = _kwarg(call, "device_type", 0)
        dtype = _kwarg(call, "dtype", 1)
        enabled = _kwarg(call, "enabled", 2)
        device_name = device.evaluated_value if isinstance(device, cst.SimpleString) else None
    else:
        device_name = kind
        enabled = _kwarg(call, "enabled", 0)
        dtype = _kwarg(call, "dtype", 1)
    if isinstance(enabled, cst.Name) and enabled.value == "False":
        return Autocast(call, None, disabled=True)
    if dtype is None:
        value: str | None = _quoted("bf16" if device_name == "cpu" else "fp16")
    else:
        value = reader.read(dtype)
        if value is None:
            return Autocast(call, None, reason=f"its dtype `{_code(dtype)}` is not a torch dtype the migrator can read")
    if enabled is not None and not (isinstance(enabled, cst.Name) and enabled.value == "True"):
        inner = f"({value})" if " if " in value else value
        value = f'{inner} if {_code(enabled)} else "no"'
    return Autocast(call, value)


def _scaler_value(call: cst.Call) -> str:
    enabled = _kwarg(call, "enabled", None)
    if enabled is None or (isinstance(enabled, cst.Name) and enabled.value == "True"):
        return _quoted("fp16")
    return f'"fp16" if {_code(enabled)} else "no"'


def _scaler_uses(facts: Facts, name: str, binding: Binding, parent) -> tuple[ScalerUse, ...]:
    uses: list[ScalerUse] = []
    calls = {id(c.node.func): c.node for c in facts.calls}
    for load in facts.loads:
        node: cst.CSTNode = load.node
        while True:
            up = parent(node)
            text = dotted_name(up) if isinstance(up, cst.Attribute) and up.value is node else None
            if text and (name == text or name.startswith(text + ".")):
                node = up
                continue
            break
        if dotted_name(node) != name or node is binding.target:
            continue
        up = parent(node)
        if isinstance(up, cst.Attribute) and up.value is node and id(up) in calls:
            method = up.attr.value
            kind = method if method in SCALER_METHODS else ("state" if "state_dict" in method else "other")
            uses.append(ScalerUse(node, kind, calls[id(up)]))
        else:
            uses.append(ScalerUse(node, "other"))
    return tuple(uses)


def precision_facts(facts: Facts, parent) -> PrecisionFacts:
    reader = _DtypeReader(facts)
    autocasts: list[Autocast] = []
    called: set[int] = set()
    for c in facts.calls:
        kind = AUTOCASTS.get(c.qualified or "")
        if kind is None:
            continue
        called.add(id(c.node.func))
        if isinstance(parent(c.node), cst.WithItem):
            autocasts.append(_autocast(c.node, kind, reader))
    indirect = [
        load.node for load in facts.loads
        if _head_of_autocast(load.node, facts, parent, called)
    ]
    scalers = []
    for b in facts.bindings:
        value = b.element if b.element is not None else b.value
        if isinstance(value, cst.Call) and facts.imports.qualify(value.func) in SCALERS:
            scalers.append(Scaler(b.name, b, _scaler_uses(facts, b.name, b, parent), _scaler_value(value)))
    values = {a.value for a in autocasts if not a.disabled and a.value is not None}
    conflict = None
    if len(values) > 1:
        conflict = "autocast regions ask for different precisions (" + ", ".join(sorted(values)) + ")"
    unreadable = next((a for a in autocasts if a.reason is not None), None)
    if unreadable is not None and conflict is None:
        conflict = "another autocast region's dtype cannot be read"
    value = next(iter(values)) if len(values) == 1 and conflict is None else None
    scaling = [s for s in scalers if any(u.kind == "scale" for u in s.uses)]
    if value is None and not values and scaling:
        scaler_values = {s.value for s in scaling}
        value = next(iter(scaler_values)) if len(scaler_values) == 1 else None
    apex = apex_amp(facts, parent)
    if apex is not None:
        if autocasts or scalers:
            conflict = conflict or "apex.amp is used beside torch's autocast or GradScaler"
        value = apex.value if conflict is None else None
    return PrecisionFacts(tuple(autocasts), tuple(scalers), tuple(indirect), value, conflict, apex)


def _head_of_autocast(name: cst.Name, facts: Facts, parent, called: set[int]) -> bool:
    """`partial(torch.autocast, ...)` or `amp = torch.cuda.amp.autocast`: the autocast
    function used as a value, so its regions cannot be found."""
    node: cst.CSTNode = name
    while isinstance(parent(node), cst.Attribute) and parent(node).value is node:
        node = parent(node)
    if id(node) in called or isinstance(parent(node), (cst.ImportAlias, cst.Decorator)):
        return False
    return (facts.imports.qualify(node) or "") in AUTOCASTS


def left_by_hand(analysis) -> bool:
    """The hand-written precision stays as it is (AM404 says why): the option cannot be
    given to the Accelerator, the regions disagree, or autocast is used through a variable."""
    from migrator.analysis.options import option_status

    precision = analysis.patterns.precision
    _, _, problem = option_status(analysis, "mixed_precision")
    return problem is not None or precision.conflict is not None or bool(precision.indirect)
