"""Where training happens: loops that call backward, the block that builds the training
objects (the "training block"), and the batch names a dataloader loop produces."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import libcst as cst

from migrator.analysis.collect import Facts, LoopFact
from migrator.analysis.names import dotted_name


@dataclass(frozen=True, eq=False)
class Block:
    """A statement list code can be inserted into: the module, a function body, or the
    body of `if __name__ == "__main__":`. `holder` is the node whose `.body` it is."""

    owner: cst.CSTNode
    holder: cst.CSTNode
    scope: cst.CSTNode  # the Module or FunctionDef whose names the block binds

    @property
    def body(self) -> Sequence[cst.BaseStatement]:
        return self.holder.body  # type: ignore[attr-defined]

    def index_of(self, node: cst.CSTNode, parent: Callable[[cst.CSTNode], cst.CSTNode | None]) -> int | None:
        """Index of the statement of this block that contains `node`, or None."""
        current: cst.CSTNode | None = node
        while current is not None:
            up = parent(current)
            if up is self.holder:
                for i, stmt in enumerate(self.body):
                    if stmt is current:
                        return i
                return None
            current = up
        return None


def is_main_guard(node: cst.CSTNode) -> bool:
    """`if __name__ == "__main__":`"""
    if not isinstance(node, cst.If) or not isinstance(node.test, cst.Comparison):
        return False
    test = node.test
    parts = [test.left, *(c.comparator for c in test.comparisons)]
    names = {dotted_name(p) for p in parts}
    strings = {p.evaluated_value for p in parts if isinstance(p, cst.SimpleString)}
    return "__name__" in names and "__main__" in strings


def enclosing_block(node: cst.CSTNode, parent: Callable[[cst.CSTNode], cst.CSTNode | None]) -> Block | None:
    """The nearest module / function / main-guard block around `node`."""
    current = parent(node)
    while current is not None:
        if isinstance(current, cst.Module):
            return Block(current, current, current)
        if isinstance(current, cst.FunctionDef) and isinstance(current.body, cst.IndentedBlock):
            return Block(current, current.body, current)
        if is_main_guard(current) and isinstance(current.body, cst.IndentedBlock):
            module = current
            while not isinstance(module, cst.Module):
                module = parent(module)
            return Block(current, current.body, module)
        current = parent(current)
    return None


def backward_loops(facts: Facts) -> set[int]:
    """ids of for-loops whose body (not nested functions) calls `.backward(...)`."""
    found: set[int] = set()
    for call in facts.calls:
        func = call.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "backward":
            found.update(id(loop) for loop in call.loops)
    return found


def training_functions(facts: Facts, methods: bool = False) -> set[str]:
    """Names of functions defined here that train: they call `.backward()` directly or
    call another training function (with `methods`, through `self.<name>(...)` too)."""
    direct: dict[str, set[str]] = {}
    trains: set[str] = set()
    for call in facts.calls:
        scope = call.scope
        if not isinstance(scope, cst.FunctionDef):
            continue
        name = scope.name.value
        func = call.node.func
        callee = local_callee(func) if methods else (func.value if isinstance(func, cst.Name) else None)
        if isinstance(func, cst.Attribute) and func.attr.value == "backward":
            trains.add(name)
        elif callee in facts.functions:
            direct.setdefault(name, set()).add(callee)  # type: ignore[arg-type]
    changed = True
    while changed:
        changed = False
        for caller, callees in direct.items():
            if caller not in trains and callees & trains:
                trains.add(caller)
                changed = True
    return trains


def local_callee(func: cst.BaseExpression) -> str | None:
    """`f(...)` → "f"; `self.f(...)` → "f"."""
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        return func.attr.value
    return None


def batch_names(loop: LoopFact, facts: Facts) -> set[str]:
    """Names that hold (parts of) the batches a dataloader loop yields: the loop targets
    (minus an enumerate index) and names unpacked or indexed from them inside the loop."""
    names = set(loop.targets)
    if isinstance(loop.node.iter, cst.Call) and (dotted_name(loop.node.iter.func) or "").endswith(
        "enumerate"
    ):
        target = loop.node.target
        if isinstance(target, cst.Tuple) and target.elements:
            first = dotted_name(target.elements[0].value)
            names.discard(first or "")
    inner = [b for b in facts.bindings if any(l is loop.node for l in b.loops)]
    changed = True
    while changed:
        changed = False
        for b in inner:
            if b.name in names or b.value is None:
                continue
            source = b.element if b.element is not None else b.value
            if _derived_from(source, names):
                names.add(b.name)
                changed = True
    return names


def _derived_from(expr: cst.BaseExpression, names: set[str]) -> bool:
    """`batch`, `batch[0]`, `batch["x"]`, `batch.x` for a batch name."""
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        if dotted_name(expr) in names:
            return True
        expr = expr.value
    return dotted_name(expr) in names
