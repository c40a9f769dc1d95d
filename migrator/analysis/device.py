"""Device variables (`device = torch.device(...)`) and device moves (`.to(device)`,
`.cuda()`), and which moves are safe to drop once prepare() places things."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrator.analysis.collect import Binding, Facts
from migrator.analysis.names import ImportTable, dotted_name

_CONFIG_HEADS = {"args", "self", "cfg", "config", "opt", "opts", "hparams", "params", "flags", "FLAGS"}
_DEVICE_STRINGS = ("cuda", "mps", "xpu")


@dataclass(frozen=True, eq=False)
class DeviceMove:
    """A `.to(...)`/`.cuda(...)` call that moves `receiver` to a device.

    `kept_args` are the arguments that must survive (a dtype); empty means the whole call
    reduces to its receiver. `device_arg` is the expression naming the device, if any.
    """

    call: cst.Call
    receiver: cst.BaseExpression
    device_arg: cst.BaseExpression | None
    kept_args: tuple[cst.Arg, ...]


@dataclass(frozen=True, eq=False)
class DeviceVariable:
    name: str
    binding: Binding


def is_device_value(expr: cst.BaseExpression | None, imports: ImportTable) -> bool:
    """Values people assign to a device variable: torch.device(...), "cuda", a ternary of
    those, `args.device`."""
    if expr is None:
        return False
    if isinstance(expr, cst.Call):
        return imports.qualify(expr.func) == "torch.device"
    if isinstance(expr, cst.IfExp):
        return is_device_value(expr.body, imports) or is_device_value(expr.orelse, imports)
    if isinstance(expr, cst.SimpleString):
        value = str(expr.evaluated_value)
        return value.startswith(_DEVICE_STRINGS) or value == "cpu"
    dotted = dotted_name(expr) or ""
    return dotted.endswith(".device") and dotted.split(".")[0] in _CONFIG_HEADS


def device_variables(facts: Facts) -> list[DeviceVariable]:
    return [
        DeviceVariable(b.name, b)
        for b in facts.bindings
        if b.element is None and is_device_value(b.value, facts.imports)
    ]


def is_device_expr(expr: cst.BaseExpression, device_names: set[str], imports: ImportTable) -> bool:
    """An argument that names a device: a device variable, torch.device(...), "cuda:0",
    `args.device`, a device index. `"cpu"` is not: moving to the CPU stays explicit."""
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, cst.SimpleString):
        return str(expr.evaluated_value).startswith(_DEVICE_STRINGS)
    if isinstance(expr, cst.Call):
        return imports.qualify(expr.func) == "torch.device"
    dotted = dotted_name(expr)
    if dotted is None:
        return False
    if dotted in device_names:
        return True
    return dotted.endswith(".device") and dotted.split(".")[0] in _CONFIG_HEADS


def device_move(call: cst.Call, device_names: set[str], imports: ImportTable) -> DeviceMove | None:
    """Recognise `x.cuda(...)`, `x.to(device, ...)`, `x.to(device=device, ...)`."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in {"to", "cuda"}:
        return None
    if func.attr.value == "cuda":
        return DeviceMove(call, func.value, call.args[0].value if call.args else None, ())
    device_arg = None
    kept: list[cst.Arg] = []
    for i, arg in enumerate(call.args):
        keyword = arg.keyword.value if arg.keyword else None
        if device_arg is None and (
            (keyword is None and i == 0) or keyword == "device"
        ) and is_device_expr(arg.value, device_names, imports):
            device_arg = arg.value
            continue
        if keyword in {"non_blocking", "copy"}:
            continue
        kept.append(arg)
    if device_arg is None:
        return None
    if kept:
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return DeviceMove(call, func.value, device_arg, tuple(kept))
