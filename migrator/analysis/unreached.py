"""Training and evaluation functions that receive their set-up from a caller elsewhere.

An `engine.py` beside `train.py` holds `train_fn(data_loader, model, optimizer, ...)` with
`loss.backward()` and `eval_fn(...)` returning per-process predictions, and builds
nothing itself: no Accelerator, no optimizer, no prepare plan. The migration of this file
alone has nothing to anchor on, yet each of these calls needs the caller's Accelerator.
This module lists them, per function, so that the file is never passed over in silence.
Nothing here edits the tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from migrator.analysis.kept_objects import kept_note, kept_object
from migrator.analysis.names import dotted_name
from migrator.analysis.roles import Role

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis

_CLIPS = {"clip_grad_norm_": "clip_grad_norm_", "clip_grad_norm": "clip_grad_norm_", "clip_grad_value_": "clip_grad_value_"}
ACCELERATOR_PARAM = "accelerator"
_SET_UP = (Role.MODEL, Role.OPTIMIZER, Role.DATALOADER, Role.SCHEDULER)


@dataclass(frozen=True, eq=False)
class Need:
    """One call in the function that needs the Accelerator: `what` the code does there,
    and `instead` what it becomes once the Accelerator is passed in."""

    node: cst.CSTNode
    what: str
    instead: str


@dataclass(frozen=True, eq=False)
class UnreachedFunction:
    """A function that trains or evaluates with objects its caller makes (`inputs`, the
    parameters the caller must prepare) and no Accelerator in reach."""

    function: cst.FunctionDef
    name: str
    inputs: tuple[str, ...]
    needs: tuple[Need, ...]
    # a method of its class that makes or replaces what it trains: (its name, ((what, line), ...)),
    # where the prepare belongs, not in a caller
    made_in: tuple[str, tuple[tuple[str, int], ...]] | None = None


def unreached_functions(analysis: "ScriptAnalysis") -> tuple[UnreachedFunction, ...]:
    """Only in a file the migration leaves alone (no Accelerator, none planned): where a
    set-up exists, AM301/AM302/AM513 rewrite these calls or say why they cannot."""
    if analysis.migrating:
        return ()
    out = []
    for function in analysis.nodes("FunctionDef"):
        assert isinstance(function, cst.FunctionDef)
        if receives_accelerator(analysis.facts, function):
            continue  # migrated with its callers in a run of several files: it has one
        inputs = _set_up_inputs(analysis, function)
        if not inputs:
            continue
        needs = _training_needs(analysis, function) + _evaluation_needs(analysis, function)
        if needs:
            needs.sort(key=lambda n: analysis.order(n.node))
            out.append(UnreachedFunction(
                function, _qualified(analysis, function), tuple(inputs), tuple(needs), _made_in_its_class(analysis, function),
            ))
    return tuple(out)


def _made_in_its_class(analysis: "ScriptAnalysis", function: cst.FunctionDef) -> tuple[str, tuple[tuple[str, int], ...]] | None:
    """pytorch-seq2seq's `SupervisedTrainer.train(model, data, ..., resume, optimizer=None)`
    builds the optimizer when none is given (`Optimizer(optim.Adam(model.parameters()))`)
    and, resuming, replaces the model it was handed with the unpickled one: whatever a
    caller prepared, the method trains what it makes (reader R1, 29th session). The first
    method of the class, other than `__init__`, that rebinds a parameter named for a model
    or an optimizer or sets `self.<optimizer>` or `self.<model>`: its name and what it binds where."""
    owner = analysis.facts.method_of.get(id(function))
    if owner is None:
        return None
    for method in owner.body.body:
        if not isinstance(method, cst.FunctionDef) or method.name.value == "__init__":
            continue
        params = set(analysis.facts.params.get(id(method), ()))
        made = []
        for b in analysis.facts.bindings:
            if b.scope is not method or b.value is None or b.element is not None:
                continue
            name = b.name.removeprefix("self.")
            named = _MODEL_PARAM.search(name) or _OPTIMIZER_PARAM.match(name)
            if named and (b.name in params or b.name.startswith("self.") and b.name.count(".") == 1):
                if not (isinstance(b.value, cst.Name) and b.value.value in params and b.value.value not in _rebound(analysis, method)):
                    made.append((b.name, analysis.position(b.statement).start.line))
        if made:
            first = {}
            for name, line in made:
                first.setdefault(name, line)
            return method.name.value, tuple(first.items())
    return None


def _rebound(analysis: "ScriptAnalysis", method: cst.FunctionDef) -> set[str]:
    """Parameters the method binds again (`optimizer = Optimizer(...)` when none was given)."""
    params = set(analysis.facts.params.get(id(method), ()))
    return {b.name for b in analysis.facts.bindings if b.scope is method and b.name in params and b.value is not None}


def receives_accelerator(facts, function: cst.FunctionDef) -> bool:
    """`function`, or for a method any method of its class, takes the Accelerator as a
    parameter (`def __init__(self, model, optimizer, *, accelerator)`): a run of several
    files threaded it, and its caller creates the Accelerator and prepares."""
    owner = facts.method_of.get(id(function))
    functions = [m for m in owner.body.body if isinstance(m, cst.FunctionDef)] if owner is not None else [function]
    return any(p.name.value == ACCELERATOR_PARAM for f in functions for p in (*f.params.params, *f.params.kwonly_params))


def in_unreached_function(analysis: "ScriptAnalysis", node: cst.CSTNode, functions: set[int] | None = None) -> bool:
    """Whether `node` lies in a function `unreached_functions` reports (AM912 leaves those
    to AM913: the advice there is to pass the caller's Accelerator in, not to build one).
    `functions`: their ids, when the caller asks for many nodes."""
    if functions is None:
        functions = {id(u.function) for u in unreached_functions(analysis)}
    current = analysis.parent(node)
    while current is not None:
        if id(current) in functions:
            return True
        current = analysis.parent(current)
    return False


def _qualified(analysis: "ScriptAnalysis", function: cst.FunctionDef) -> str:
    owner = analysis.facts.method_of.get(id(function))
    return f"{owner.name.value}.{function.name.value}" if owner is not None else function.name.value


# not a bare `opt`: scripts name their argparse options so (clovaai's validation(..., opt))
_OPTIMIZER_PARAM = re.compile(r"^(optim|optimizer|optimiser)(_\w+)?$|_optimi[sz]er$")
_MODEL_PARAM = re.compile(r"^(model|net|network)$|_(model|net)$")


def _set_up_inputs(analysis: "ScriptAnalysis", function: cst.FunctionDef) -> list[str]:
    """Parameters used as a model (called), an optimizer or a scheduler (stepped, or named
    or annotated so), or a loader (by role); in a method, also what `__init__` stored
    from such parameters (`self.model = model`)."""
    inputs = _parameter_inputs(analysis, function)
    owner = analysis.facts.method_of.get(id(function))
    if owner is not None and function.name.value != "__init__":
        for init in owner.body.body:
            if isinstance(init, cst.FunctionDef) and init.name.value == "__init__":
                stored = set(_parameter_inputs(analysis, init)) | _model_params(analysis, init)
                stored |= {p for p in analysis.facts.params.get(id(init), ()) if _MODEL_PARAM.search(p)}
                inputs += [f"self.{b.name.split('.', 1)[1]}" for b in analysis.facts.bindings
                           if b.scope is init and b.name.startswith("self.") and isinstance(b.value, cst.Name)
                           and b.value.value in stored and f"self.{b.name.split('.', 1)[1]}" not in inputs]
    return inputs


def _model_params(analysis: "ScriptAnalysis", function: cst.FunctionDef) -> set[str]:
    """Parameters whose `.parameters()` the function reads: models."""
    params = set(analysis.facts.params.get(id(function), ()))
    return {
        dotted_name(c.node.func.value) or ""
        for c in analysis.facts.calls
        if c.scope is function and isinstance(c.node.func, cst.Attribute)
        and c.node.func.attr.value in ("parameters", "named_parameters") and dotted_name(c.node.func.value) in params
    }


def _parameter_inputs(analysis: "ScriptAnalysis", function: cst.FunctionDef) -> list[str]:
    params = [p for p in analysis.facts.params.get(id(function), ()) if p not in ("self", "cls")]
    annotated = {
        p.name.value for p in function.params.params
        if p.annotation is not None and "Optimizer" in cst.Module([]).code_for_node(p.annotation.annotation)
    }
    called, scalers = set(), set()
    for c in analysis.facts.calls:
        func = c.node.func
        if c.scope is not function:
            continue
        if isinstance(func, cst.Name):
            called.add(func.value)
        elif isinstance(func, cst.Attribute) and func.attr.value in ("step", "zero_grad") and isinstance(func.value, cst.Name):
            called.add(func.value.value)
        if isinstance(func, cst.Attribute) and func.attr.value in ("scale", "unscale_") and isinstance(func.value, cst.Name):
            scalers.add(func.value.value)  # a GradScaler steps too, but prepare() takes none
    return [
        p for p in params
        if (p in called or analysis.roles.of(p) in _SET_UP or p in annotated or _OPTIMIZER_PARAM.match(p)) and p not in scalers
    ]


def _training_needs(analysis: "ScriptAnalysis", function: cst.FunctionDef) -> list[Need]:
    needs = []
    for c in analysis.facts.calls:
        if c.scope is not function:
            continue
        func = c.node.func
        qualified = c.qualified or ""
        if isinstance(func, cst.Attribute) and func.attr.value == "backward":
            receiver = func.value
            if (analysis.imports.qualify(receiver) or "").startswith("torch"):
                continue
            if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value == "scale" and receiver.args:
                receiver = receiver.args[0].value  # scaler.scale(loss).backward(): the Accelerator scales
            apex = analysis.patterns.precision.apex if analysis.patterns is not None else None
            scaled = next((b for b in apex.backwards if b.backward is c.node), None) if apex is not None else None
            if scaled is not None:
                receiver = scaled.loss  # under apex's `amp.scale_loss(loss, ...)`: the loss it scales
            shown = _code(receiver.with_changes(lpar=[], rpar=[]) if hasattr(receiver, "lpar") else receiver)
            loss = shown if len(shown) < 40 else "loss"
            called = _code(func.value) if len(_code(func.value)) < 40 else "loss"
            kept = kept_object(analysis, c.node, function)
            instead = f"`accelerator.backward(...)`, not of `{loss}`: {kept_note(loss, kept)}" if kept else f"`accelerator.backward({loss})`"
            needs.append(Need(c.node, f"calls `{called}.backward()`", instead))
        elif qualified.startswith("torch.nn.utils") and qualified.rsplit(".", 1)[-1] in _CLIPS:
            method = _CLIPS[qualified.rsplit(".", 1)[-1]]
            needs.append(Need(c.node, f"clips with `{qualified.rsplit('.', 1)[-1]}`", f"`accelerator.{method}(...)`"))
        elif isinstance(func, cst.Attribute) and func.attr.value == "step" and not _has_backward(analysis, function):
            owner = dotted_name(func.value)
            if analysis.roles.of(owner) is Role.OPTIMIZER:
                needs.append(Need(c.node, f"steps `{owner}`", f"`{owner}` the prepared optimizer, its loss through `accelerator.backward`"))
    return needs


def _has_backward(analysis: "ScriptAnalysis", function: cst.FunctionDef) -> bool:
    return any(
        c.scope is function and isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == "backward"
        for c in analysis.facts.calls
    )


def _evaluation_needs(analysis: "ScriptAnalysis", function: cst.FunctionDef) -> list[Need]:
    """Evaluation loops whose collected outputs are this process's share: the metrics
    analysis already knows them (a loader parameter counts as sharded)."""
    needs = []
    patterns = analysis.patterns
    for gather in patterns.metrics if patterns is not None else ():
        if analysis.scope_of(gather.loop) is not function:
            continue
        shown = ", ".join(f"`{_short(s)}`" for s in gather.statements[:2])
        more = " and more" if len(gather.statements) > 2 else ""
        needs.append(
            Need(
                gather.anchor,
                f"collects {shown}{more} batch by batch: once its loader is prepared, that is this "
                "process's share of the data only",
                "`accelerator.gather_for_metrics(...)` on the predictions and targets first",
            )
        )
    for sync in patterns.meters if patterns is not None else ():  # analysis/meters.py
        if analysis.scope_of(sync.loop) is not function or sync.done:
            continue
        shown = ", ".join(f"`{name}`" for name in sync.names)
        needs.append(
            Need(
                sync.updates[0],
                f"keeps running meters {shown} batch by batch: once its loader is prepared, they average "
                "this process's share of the data only",
                "`accelerator.reduce` of their sums and counts after the loop",
            )
        )
    return needs


def _short(statement: cst.CSTNode) -> str:
    text = _code(statement)
    return text.split("+=")[0].strip() + " += ..." if "+=" in text else text.split("(")[0] + "(...)"


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).strip()
