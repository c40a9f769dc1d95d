"""Uses of a prepared model that reach through its wrapper.

On N processes `prepare()` returns DistributedDataParallel around the user's model; on one
it returns the model itself. torch.nn.Module's own API answers alike on both (DDP is a
Module; `parameters()`, `train()`, `to()`... act on the same parameters), but anything of
the user's class, a method (`generate`, `init_hidden`, `decode`), a submodule
(`model.linear.weight`) or an attribute (`output_shape`), raises AttributeError on the
wrapper, `no_sync()` does not exist on the plain model, and `state_dict()` keys gain
`module.` on the wrapper only. Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import libcst as cst

from migrator.analysis.names import dotted_name
from migrator.analysis.prepared import holds_prepared_model, prepared_models
from migrator.analysis.walk import walk
from migrator.torch_api import MODULE_API

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis



@dataclass(frozen=True, eq=False)
class WrappedUse:
    """`model.attr` where `model` (the expression `holder`, dotted text `name`) is a
    prepared model at that place; `attribute` is the `model.attr` node."""

    holder: cst.BaseExpression
    name: str
    attribute: cst.Attribute

    @property
    def attr(self) -> str:
        return self.attribute.attr.value


def module_reader_flags(entries) -> dict[str, str]:
    """Config.project_module_readers (`CheckpointIO|data_parallel`, `Solver`) as call
    spelling → the flag it must be handed true for the reader to read `.module` ("": none)."""
    return dict((entry.split("|") + [""])[:2] for entry in entries)


def wrapped_uses(analysis: "ScriptAnalysis") -> list[WrappedUse]:
    """Every `model.attr` on a prepared model, in document order: after its prepare() in
    the same function, the module-level prepared model in functions that do not rebind
    it, a prepared `self.model` anywhere, and a parameter of a plain function that some
    call in this file passes a prepared model."""
    models = prepared_models(analysis)
    if not models:
        return []
    heads = {name.split(".")[0] for name in models}
    params = _model_parameters(analysis, models)
    out: list[WrappedUse] = []
    for load in analysis.facts.loads:
        if load.name in params.get(id(load.scope), ()):
            up = analysis.parent(load.node)
            if isinstance(up, cst.Attribute) and up.value is load.node:
                out.append(WrappedUse(load.node, load.name, up))
            continue
        if load.name not in heads:
            continue
        found = _attribute_of(analysis, load.node, models)
        if found is not None and holds_prepared_model(analysis, found.holder, found.name, models):
            prepares = models[found.name]
            if not _before_prepare(analysis, found, prepares) and not _rebound_since_prepare(analysis, found, prepares):
                out.append(found)
    return out


def prepared_model_at(analysis: "ScriptAnalysis", expr: cst.BaseExpression) -> str | None:
    """The name of the prepared model `expr` (a plain or dotted name) is at that place:
    after its prepare() and not bound again since; None otherwise."""
    models = prepared_models(analysis)
    name = dotted_name(expr)
    if name is None or name not in models or not holds_prepared_model(analysis, expr, name, models):
        return None
    use = WrappedUse(expr, name, expr)  # type: ignore[arg-type]
    if _before_prepare(analysis, use, models[name]) or _rebound_since_prepare(analysis, use, models[name]):
        return None
    return name


def _before_prepare(analysis: "ScriptAnalysis", use: WrappedUse, prepares: list[cst.Call]) -> bool:
    """`self.model.x` above the prepare() of the same method: still the plain model."""
    scope = analysis.scope_of(use.holder)
    here = [analysis.order(p) for p in prepares if analysis.scope_of(p) is scope]
    return bool(here) and min(here) > analysis.order(use.holder)


def _rebound_since_prepare(analysis: "ScriptAnalysis", use: WrappedUse, prepares: list[cst.Call]) -> bool:
    """`model = Net()` between the prepare() and the use, in the same scope: a fresh,
    unwrapped model (a rebuilt model for inference)."""
    scope = analysis.scope_of(use.holder)
    at = analysis.order(use.holder)
    before = [analysis.order(p) for p in prepares if analysis.scope_of(p) is scope and analysis.order(p) < at]
    if not before:
        return False
    since = max(before)
    return any(
        b.scope is scope and b.name == use.name and since < analysis.order(b.statement) < at
        for b in analysis.facts.bindings
    )


def _attribute_of(analysis: "ScriptAnalysis", head: cst.Name, models) -> WrappedUse | None:
    """`model.attr` (or `self.model.attr`) starting at the load `head`."""
    current: cst.CSTNode = head
    while True:
        up = analysis.parent(current)
        if not (isinstance(up, cst.Attribute) and up.value is current):
            return None
        name = dotted_name(current)
        if name in models:
            return WrappedUse(current, name, up)  # type: ignore[arg-type]
        current = up


def _model_parameters(analysis: "ScriptAnalysis", models) -> dict[int, set[str]]:
    """id(function) → its parameters that receive a prepared model from some call here
    (`train(model)` after prepare, for `def train(model): model.init_hidden(...)`; a
    method of an instance of this file's class, `ema.update(model)` for `def update(self,
    model): msd = model.state_dict()`), and that the function never rebinds."""
    facts = analysis.facts
    out: dict[int, set[str]] = {}
    for call in facts.calls:
        func = call.node.func
        if isinstance(func, cst.Name):
            functions = [f for f in facts.functions.get(func.value, ()) if id(f) not in facts.method_of]
        else:
            functions = _methods_called(facts, func)
        for function in functions:
            for param, given in _passed(function, call.node, bound=id(function) in facts.method_of):
                name = dotted_name(given)
                if name in models and holds_prepared_model(analysis, given, name, models):
                    rebound = any(b.scope is function and b.name == param for b in facts.bindings)
                    if not rebound:
                        out.setdefault(id(function), set()).add(param)
    return out


def _methods_called(facts, func: cst.BaseExpression) -> list[cst.FunctionDef]:
    """`ema.update` with `ema = EMA(model)` bound once, EMA a class of this file: its
    method `update` (a plain method: not a static or class method)."""
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return []
    values = [b.value for b in facts.bindings if b.name == func.value.value]
    if len(values) != 1 or not isinstance(values[0], cst.Call) or not isinstance(values[0].func, cst.Name):
        return []
    cls = facts.classes.get(values[0].func.value)
    if cls is None:
        return []
    return [
        f for f in facts.functions.get(func.attr.value, ())
        if facts.method_of.get(id(f)) is cls and not f.decorators
    ]


def _passed(function: cst.FunctionDef, call: cst.Call, bound: bool = False) -> Iterator[tuple[str, cst.BaseExpression]]:
    """(parameter, argument) pairs of `call` to `function`, by position and keyword
    (`bound`: a method called on an instance, whose first parameter is the instance)."""
    params = function.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)][1 if bound else 0:]
    keywords = set(positional) | {p.name.value for p in params.kwonly_params}
    index = 0
    for arg in call.args:
        if arg.star:
            return
        if arg.keyword is None:
            if index < len(positional):
                yield positional[index], arg.value
            index += 1
        elif arg.keyword.value in keywords:
            yield arg.keyword.value, arg.value


_NO_GRAD = ("no_grad", "inference_mode")


def forward_in_training_step(analysis: "ScriptAnalysis", use: WrappedUse) -> bool:
    """Whether `model.method(...)` computes with the model's layers inside a training step
    (the innermost loop of a `backward()`, or a function that calls backward outside
    loops), outside `torch.no_grad()`. Through the unwrapped model such a forward skips
    DistributedDataParallel, whose gradient hooks then do not all-reduce: N processes
    would drift apart without an error. A method defined in this file that only builds
    tensors (`init_hidden`) does not count; one that is not defined here does. A step that
    also calls the model itself (`model(x)`) goes through DDP's forward and is safe."""
    call = analysis.parent(use.attribute)
    if not (isinstance(call, cst.Call) and call.func is use.attribute) or _under_no_grad(analysis, call):
        return False
    facts = analysis.facts
    fact = next((c for c in facts.calls if c.node is call), None)
    if fact is None:
        return False
    steps = {id(c.loops[-1]) for c in facts.calls if c.loops and _is_backward(c.node)}
    if fact.loops:
        step = fact.loops[-1]
        in_step = id(step) in steps
        through_wrapper = any(c.func == use.name and any(l is step for l in c.loops) for c in facts.calls)
    else:
        in_step = any(c.scope is fact.scope and not c.loops and _is_backward(c.node) for c in facts.calls)
        through_wrapper = any(c.func == use.name and c.scope is fact.scope for c in facts.calls)
    # `x, y = model.parse_batch(batch); y_pred = model(x)`: the step also runs the wrapper's
    # forward, which arms DDP's all-reduce for every parameter that gets a gradient
    return in_step and not through_wrapper and _runs_layers(analysis, use.attr, depth=0)


def _is_backward(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward"


def _under_no_grad(analysis: "ScriptAnalysis", node: cst.CSTNode) -> bool:
    current = analysis.parent(node)
    while current is not None:
        if isinstance(current, cst.With):
            for item in current.items:
                inner = item.item.func if isinstance(item.item, cst.Call) else item.item
                if (dotted_name(inner) or "").endswith(_NO_GRAD):
                    return True
        if isinstance(current, cst.FunctionDef):
            for deco in current.decorators:
                inner = deco.decorator.func if isinstance(deco.decorator, cst.Call) else deco.decorator
                if (dotted_name(inner) or "").endswith(_NO_GRAD):
                    return True
            return False
        current = analysis.parent(current)
    return False


def _runs_layers(analysis: "ScriptAnalysis", method: str, depth: int) -> bool:
    """Whether a method of the model's class calls the model or a submodule (`self(x)`,
    `self.fc(x)`), directly or through its other methods; True when no class here
    defines it (a library model's method: unknown, so assumed)."""
    for cls in analysis.facts.classes.values():
        methods = {f.name.value: f for f in cls.body.body if isinstance(f, cst.FunctionDef)}
        if method not in methods:
            continue
        finder = _SelfCalls()
        walk(methods[method], finder)
        for name in finder.names:
            if name == "":
                return True
            if name in methods:
                if depth < 3 and _runs_layers(analysis, name, depth + 1):
                    return True
            elif name not in MODULE_API:
                return True
        return False
    return True


class _SelfCalls(cst.CSTVisitor):
    """Names called on `self` in a method: "" for `self(...)`, "fc" for `self.fc(...)`."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name) and func.value == "self":
            self.names.append("")
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            self.names.append(func.attr.value)
