"""One evaluation loop's values: what it binds, its roots (model outputs and batch
tensors) and everything computed from them. metrics.py decides what to gather from it.
Nothing here edits the tree.
"""

from __future__ import annotations

import re

from typing import Iterator

import libcst as cst

from migrator.analysis.collect import Facts, LoopFact
from migrator.analysis.losses import loss_modules, loss_reduction
from migrator.analysis.names import dotted_name
from migrator.analysis.roles import Role, RoleTable
from migrator.analysis.walk import descendants, walk

COLLECTORS = {"append", "extend", "update", "add", "add_batch", "add_batches"}


def snake_case(name: str) -> str:
    """`addBatch` -> `add_batch`: lidar-bonnetal's confusion matrix (`evaluator.addBatch(argmax,
    labels)`) collects as `add_batch` does."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), name)
# methods whose result is no longer a tensor: `gather_for_metrics` cannot take it
_OUT_OF_TORCH = {"numpy", "tolist", "item"}


def names_in(node: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class _Find(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.append(n)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            walk(n.value, self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            walk(n.value, self)
            return False

    walk(node, _Find())
    return found


def body_lines(block: cst.BaseSuite, direct: bool = True) -> Iterator[tuple[cst.BaseStatement, bool]]:
    """Statements of a loop body in order, through `with` blocks; `direct` is False under
    an if/try/nested loop (a metric there cannot be gathered unconditionally)."""
    if not isinstance(block, cst.IndentedBlock):
        return
    for stmt in block.body:
        yield stmt, direct
        if isinstance(stmt, cst.With):
            yield from body_lines(stmt.body, direct)
        elif isinstance(stmt, (cst.If, cst.Try, cst.For, cst.While)):
            yield from body_lines(stmt.body, False)
            orelse = getattr(stmt, "orelse", None)
            while orelse is not None and hasattr(orelse, "body"):
                yield from body_lines(orelse.body, False)
                orelse = getattr(orelse, "orelse", None)


def model_names(facts: Facts, roles: RoleTable) -> set[str]:
    """Model names, with the attributes they are stored in (`self.model = model`)."""
    names = set(roles.names(Role.MODEL))
    names |= {b.name for b in facts.bindings if isinstance(b.value, cst.Name) and b.value.value in names}
    return names


def is_model_call(value: cst.CSTNode, models: set[str]) -> bool:
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            found = found or dotted_name(node.func) in models

    walk(value, _Find())
    return found


class EvalLoop:
    """One loop's bindings, roots (model outputs and batch tensors) and everything
    computed from them."""

    def __init__(self, fact: LoopFact, facts: Facts, roles: RoleTable) -> None:
        self.fact = fact
        self.roles = roles
        self.lines = list(body_lines(fact.node.body))
        self.order = {id(s): i for i, (s, _) in enumerate(self.lines)}
        self.targets = set(fact.targets) - {enumerate_index(fact.node)}
        self.bound: dict[str, tuple[int, cst.BaseExpression | None, cst.BaseStatement]] = {}
        for b in facts.bindings:
            if id(b.statement) in self.order and "." not in b.name and b.name not in self.bound:
                value = b.element if b.element is not None else b.value
                self.bound[b.name] = (self.order[id(b.statement)], value, b.statement)  # type: ignore[assignment]
        self.roots: set[str] = set(self.targets)
        models = model_names(facts, roles)
        self.models = models
        self.criteria = loss_modules(facts)
        # model outputs turned into NumPy or Python values where they are bound
        # (`pred = model(x).argmax(1).cpu().numpy()`): nothing of them can be gathered
        self.converted_outputs: set[str] = set()
        for name, (_, value, _) in self.bound.items():
            if value is None:
                continue
            if is_model_call(value, models):
                self.roots.add(name)
                if leaves_torch(value):
                    self.converted_outputs.add(name)
            elif view_of(value, self.targets):
                self.roots.add(name)
        self.tensors = set(self.roots)
        changed = True
        while changed:
            changed = False
            for name, (_, value, _) in self.bound.items():
                if name not in self.tensors and value is not None and any(n.value in self.tensors for n in names_in(value)):
                    self.tensors.add(name)
                    changed = True

    def metric(self, small: cst.BaseSmallStatement) -> cst.CSTNode | None:
        """The expression a metric statement counts, or None when it is not one."""
        if isinstance(small, cst.AugAssign) and dotted_name(small.target) not in self.bound:
            return small.value if self._reads_tensors(small.value) else None
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = small.value.func
            if isinstance(func, cst.Attribute) and snake_case(func.attr.value) in COLLECTORS:
                owner = dotted_name(func.value)
                if owner and owner.split(".")[0] not in self.bound and self._reads_tensors(small.value):
                    return small.value
        return None

    def _reads_tensors(self, node: cst.CSTNode) -> bool:
        return any(n.value in self.tensors for n in names_in(node))

    def sources(self, node: cst.CSTNode, scalars: dict[str, str], seen: set[str] | None = None) -> set[str]:
        """Like roots_of, but a scalar loss bound in the loop (`loss = criterion(out, y)`,
        `loss = outputs.loss`) is a source of its own, kept in `scalars` with its
        reduction: gathering a 0-d loss makes it an N-element tensor (`.item()` fails),
        and gathering what it was computed from may cut sequences along the wrong axis."""
        seen = set() if seen is None else seen
        out: set[str] = set()
        for n in names_in(node):
            name = n.value
            if name in seen or name not in self.tensors:
                continue
            seen.add(name)
            reduction = self.scalar_loss(name) or self._read_as_number(node, name)
            if reduction is not None:
                scalars[name] = reduction
            elif name in self.roots:
                out.add(name)
            elif name in self.bound and self.bound[name][1] is not None:
                out |= self.sources(self.bound[name][1], scalars, seen)  # type: ignore[arg-type]
        return out

    def scalar_loss(self, name: str) -> str | None:
        """"mean" or "sum" when `name` is bound in the loop to a reduced loss tensor."""
        if name not in self.bound or self.bound[name][1] is None:
            return None
        return loss_reduction(self.bound[name][1], self.criteria)  # type: ignore[arg-type]

    def _read_as_number(self, node: cst.CSTNode, name: str) -> str | None:
        """"mean" when the metric reads `name.item()` and `name`, a loss, is bound in the
        loop from the model's own output (`_, _, loss = model(**batch)`): a one-element
        tensor on every batch, so gathering it gives N values and `.item()` fails. The mean
        of the processes' values keeps what the script averages (a per-batch figure),
        whatever the loss's reduction."""
        bound = self.bound.get(name)
        if bound is None or not isinstance(bound[1], cst.Call) or "loss" not in name.lower():
            return None
        if self.roles.of(dotted_name(bound[1].func)) is not Role.MODEL:
            return None
        for n in descendants(node):
            if (
                isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "item"
                and isinstance(n.func.value, cst.Name) and n.func.value.value == name
            ):
                return "mean"
        return None

    def roots_of(self, node: cst.CSTNode, seen: set[str] | None = None) -> set[str]:
        seen = set() if seen is None else seen
        out: set[str] = set()
        for n in names_in(node):
            name = n.value
            if name in seen or name not in self.tensors:
                continue
            seen.add(name)
            if name in self.roots:
                out.add(name)
            elif name in self.bound and self.bound[name][1] is not None:
                out |= self.roots_of(self.bound[name][1], seen)  # type: ignore[arg-type]
        return out


def leaves_torch(value: cst.CSTNode) -> bool:
    """`labels.cpu().numpy()`, `out.argmax(1).tolist()`: the value is a NumPy array or a
    Python value, which `gather_for_metrics` cannot gather: the tensor before it can."""
    return any(
        isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _OUT_OF_TORCH
        for n in descendants(value)
    )


def view_of(value: cst.BaseExpression, targets: set[str]) -> bool:
    """`batch`, `batch["labels"]`, `batch[1].to(device)`: a part of what the loop yields
    that is still a tensor (`labels.cpu().numpy()` is computed from one, not a view)."""
    if leaves_torch(value):
        return False
    while True:
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            value = value.func.value
        elif isinstance(value, (cst.Subscript, cst.Attribute)):
            value = value.value
        else:
            break
    return isinstance(value, cst.Name) and value.value in targets


def enumerate_index(loop: cst.For) -> str:
    """`i` of `for i, batch in enumerate(loader)`, also of `tqdm(enumerate(loader), ...)`."""
    it = loop.iter
    while isinstance(it, cst.Call) and (dotted_name(it.func) or "").rsplit(".", 1)[-1] == "tqdm" and it.args:
        it = it.args[0].value
    if isinstance(it, cst.Call) and (dotted_name(it.func) or "").endswith("enumerate"):
        if isinstance(loop.target, cst.Tuple) and loop.target.elements:
            return dotted_name(loop.target.elements[0].value) or ""
    return ""
