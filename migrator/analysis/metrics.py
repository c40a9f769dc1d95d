"""Evaluation metrics counted per process, and what to gather so they count every process.

In an evaluation loop over a prepared dataloader each process sees 1/N of the data, so
`correct += (pred == target).sum().item()` counts 1/N of the answers. The fix gathers the
loop's per-sample tensors with `accelerator.gather_for_metrics` before anything is counted:
the model outputs and batch tensors the metrics are computed from (the *roots*), right after
the last of them is bound, so every value derived from them (`pred = output.argmax(1)`)
and every metric is over all processes. Hugging Face `metric.add_batch(predictions=...,
references=...)` gathers its arguments instead, as run_glue_no_trainer does. Nothing here
edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from migrator.analysis.collect import Facts, LoopFact
from migrator.analysis.names import dotted_name
from migrator.analysis.roles import Role, RoleTable

_COLLECTORS = {"append", "extend", "update", "add", "add_batch", "add_batches"}
_KEYWORD_COLLECTORS = {"add_batch", "add"}
_GATHERS = {"gather", "gather_for_metrics", "reduce", "all_gather", "all_reduce", "pad_across_processes"}


@dataclass(frozen=True, eq=False)
class ArgGather:
    """`metric.add_batch(predictions=p, references=batch["labels"])`: gather the argument
    values into names (the keywords) right before the call."""

    statement: cst.SimpleStatementLine
    call: cst.Call
    args: tuple[tuple[str, cst.Arg], ...]  # (name to gather into, the arg)


@dataclass(frozen=True, eq=False)
class MetricsGather:
    """One evaluation loop's metrics: gather `names` after `after` (a statement in the
    loop), or before the loop body's first statement when `after` is None; `arg_gathers`
    for add_batch-style calls; `reason` when the shape does not allow it."""

    loop: cst.For
    statements: tuple[cst.BaseSmallStatement, ...]
    names: tuple[str, ...]
    after: cst.BaseStatement | None
    arg_gathers: tuple[ArgGather, ...]
    reason: str | None
    anchor: cst.CSTNode


def _names_in(node: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class _Find(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.append(n)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

    node.visit(_Find())
    return found


def _body_lines(block: cst.BaseSuite, direct: bool = True) -> Iterator[tuple[cst.BaseStatement, bool]]:
    """Statements of a loop body in order, through `with` blocks; `direct` is False under
    an if/try/nested loop (a metric there cannot be gathered unconditionally)."""
    if not isinstance(block, cst.IndentedBlock):
        return
    for stmt in block.body:
        yield stmt, direct
        if isinstance(stmt, cst.With):
            yield from _body_lines(stmt.body, direct)
        elif isinstance(stmt, (cst.If, cst.Try, cst.For, cst.While)):
            yield from _body_lines(stmt.body, False)
            orelse = getattr(stmt, "orelse", None)
            while orelse is not None and hasattr(orelse, "body"):
                yield from _body_lines(orelse.body, False)
                orelse = getattr(orelse, "orelse", None)


def _models(facts: Facts, roles: RoleTable) -> set[str]:
    """Model names, with the attributes they are stored in (`self.model = model`)."""
    names = set(roles.names(Role.MODEL))
    names |= {b.name for b in facts.bindings if isinstance(b.value, cst.Name) and b.value.value in names}
    return names


def _is_model_call(value: cst.CSTNode, models: set[str]) -> bool:
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            found = found or dotted_name(node.func) in models

    value.visit(_Find())
    return found


class _Loop:
    """One loop's bindings, roots (model outputs and batch tensors) and everything
    computed from them."""

    def __init__(self, fact: LoopFact, facts: Facts, roles: RoleTable) -> None:
        self.fact = fact
        self.roles = roles
        self.lines = list(_body_lines(fact.node.body))
        self.order = {id(s): i for i, (s, _) in enumerate(self.lines)}
        self.targets = set(fact.targets) - {_enumerate_index(fact.node)}
        self.bound: dict[str, tuple[int, cst.BaseExpression | None, cst.BaseStatement]] = {}
        for b in facts.bindings:
            if id(b.statement) in self.order and "." not in b.name and b.name not in self.bound:
                value = b.element if b.element is not None else b.value
                self.bound[b.name] = (self.order[id(b.statement)], value, b.statement)  # type: ignore[assignment]
        self.roots: set[str] = set(self.targets)
        models = _models(facts, roles)
        for name, (_, value, _) in self.bound.items():
            if value is not None and (_is_model_call(value, models) or _view_of(value, self.targets)):
                self.roots.add(name)
        self.tensors = set(self.roots)
        changed = True
        while changed:
            changed = False
            for name, (_, value, _) in self.bound.items():
                if name not in self.tensors and value is not None and any(n.value in self.tensors for n in _names_in(value)):
                    self.tensors.add(name)
                    changed = True

    def metric(self, small: cst.BaseSmallStatement) -> cst.CSTNode | None:
        """The expression a metric statement counts, or None when it is not one."""
        if isinstance(small, cst.AugAssign) and dotted_name(small.target) not in self.bound:
            return small.value if self._reads_tensors(small.value) else None
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = small.value.func
            if isinstance(func, cst.Attribute) and func.attr.value in _COLLECTORS:
                owner = dotted_name(func.value)
                if owner and owner.split(".")[0] not in self.bound and self._reads_tensors(small.value):
                    return small.value
        return None

    def _reads_tensors(self, node: cst.CSTNode) -> bool:
        return any(n.value in self.tensors for n in _names_in(node))

    def roots_of(self, node: cst.CSTNode, seen: set[str] | None = None) -> set[str]:
        seen = set() if seen is None else seen
        out: set[str] = set()
        for n in _names_in(node):
            name = n.value
            if name in seen or name not in self.tensors:
                continue
            seen.add(name)
            if name in self.roots:
                out.add(name)
            elif name in self.bound and self.bound[name][1] is not None:
                out |= self.roots_of(self.bound[name][1], seen)  # type: ignore[arg-type]
        return out


def _view_of(value: cst.BaseExpression, targets: set[str]) -> bool:
    """`batch`, `batch["labels"]`, `batch[1].to(device)`: a part of what the loop yields."""
    while True:
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            value = value.func.value
        elif isinstance(value, (cst.Subscript, cst.Attribute)):
            value = value.value
        else:
            break
    return isinstance(value, cst.Name) and value.value in targets


def _enumerate_index(loop: cst.For) -> str:
    it = loop.iter
    if isinstance(it, cst.Call) and (dotted_name(it.func) or "").endswith("enumerate"):
        if isinstance(loop.target, cst.Tuple) and loop.target.elements:
            return dotted_name(loop.target.elements[0].value) or ""
    return ""


def _already_gathered(loop: cst.For) -> bool:
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = node.func
            found = found or (isinstance(func, cst.Attribute) and func.attr.value in _GATHERS)

    loop.body.visit(_Find())
    return found


def _subscripted_roots(loop: _Loop, statements: list[cst.BaseSmallStatement]) -> list[str]:
    """Loop targets read only through `batch["labels"]` in metrics: gathering the whole
    batch (inputs of different lengths on different processes) is not what is wanted."""
    out = []
    for small in statements:
        for n in _names_in(small):
            if n.value in loop.targets and n.value not in out:
                out.append(n.value)
    return out


def metrics_gathers(facts: Facts, roles: RoleTable, backward_loops: set[int], prepared: frozenset[str], parent) -> tuple[MetricsGather, ...]:
    out = []
    for fact in facts.loops:
        name = fact.iter_name
        if id(fact.node) in backward_loops or roles.of(name) is not Role.DATALOADER:
            continue
        if not _sharded(name, fact, facts, prepared) or _already_gathered(fact.node):
            continue
        found = _gather(fact, facts, roles, parent)
        if found is not None and not _aggregated_later(found, fact, facts):
            out.append(found)
    return tuple(out)


def _sharded(name: str | None, fact: LoopFact, facts: Facts, prepared: frozenset[str]) -> bool:
    """The loop iterates a prepared loader: prepared here, a parameter (the caller passes
    the prepared one), or `self.loader` stored from one (`self.loader = loader`)."""
    if name is None:
        return False
    if name in prepared or (isinstance(fact.scope, cst.FunctionDef) and name in facts.params.get(id(fact.scope), ())):
        return True
    if not name.startswith("self."):
        return False
    for b in facts.bindings:
        if b.name == name and isinstance(b.value, cst.Name):
            source = b.value.value
            if source in prepared or (isinstance(b.scope, cst.FunctionDef) and source in facts.params.get(id(b.scope), ())):
                return True
    return False


def _gather(fact: LoopFact, facts: Facts, roles: RoleTable, parent) -> MetricsGather | None:
    loop = _Loop(fact, facts, roles)
    statements: list[cst.BaseSmallStatement] = []
    arg_gathers: list[ArgGather] = []
    reason = None
    roots: set[str] = set()
    for stmt, direct in loop.lines:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            value = loop.metric(small)
            if value is None:
                continue
            statements.append(small)
            if not direct:
                reason = reason or "a metric is counted under a condition or in a nested loop"
                continue
            call = small.value if isinstance(small, cst.Expr) else None
            if isinstance(call, cst.Call) and call.func.attr.value in _KEYWORD_COLLECTORS and call.args and all(  # type: ignore[union-attr]
                a.keyword is not None for a in call.args
            ):
                arg_gathers.append(ArgGather(stmt, call, tuple((a.keyword.value, a) for a in call.args)))  # type: ignore[union-attr]
                continue
            roots |= loop.roots_of(value)
    if not statements:
        return None
    subscripted = [r for r in _subscripted_roots(loop, statements) if r in roots and _only_subscripted(r, statements)]
    if subscripted and reason is None:
        reason = f"a metric reads `{subscripted[0]}[...]` directly; gather that value first"
    ordered = sorted(roots, key=lambda r: _first_read(r, statements, loop))
    after = None
    bound_inside = [loop.bound[r] for r in ordered if r in loop.bound]
    if bound_inside:
        after = max(bound_inside, key=lambda b: b[0])[2]
        first_metric = min(loop.order.get(id(parent(s)), 0) for s in statements)
        if loop.order[id(after)] > first_metric and reason is None:
            reason = "a metric is counted before the model output it needs is computed"
    return MetricsGather(fact.node, tuple(statements), tuple(ordered), after, tuple(arg_gathers), reason, statements[0])


def _aggregated_later(found: MetricsGather, fact: LoopFact, facts: Facts) -> bool:
    """The script already combines the counts across processes itself
    (`dist.all_reduce(correct)` after the loop): gathering too would count N times."""
    accumulators = set()
    for small in found.statements:
        if isinstance(small, cst.AugAssign):
            accumulators.add(dotted_name(small.target))
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            accumulators.add(dotted_name(small.value.func.value))  # type: ignore[attr-defined]
    for c in facts.calls:
        func = c.node.func
        if c.scope is not fact.scope or fact.node in c.loops or not isinstance(func, cst.Attribute):
            continue
        if func.attr.value in _GATHERS and any(dotted_name(a.value) in accumulators for a in c.node.args):
            return True
    return False


def _first_read(root: str, statements: list[cst.BaseSmallStatement], loop: _Loop) -> tuple[int, int]:
    """Order of the gathered names: as the metrics first read them (directly or through
    a value computed from them)."""
    for i, small in enumerate(statements):
        names = _names_in(small)
        for j, n in enumerate(names):
            if n.value == root or (n.value in loop.bound and root in loop.roots_of(n)):
                return (i, j)
    return (len(statements), 0)


def _only_subscripted(name: str, statements: list[cst.BaseSmallStatement]) -> bool:
    """Every read of `name` in the metric statements is `name[...]`."""
    reads = 0
    subscripted = 0

    class _Find(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> None:
            nonlocal subscripted
            if isinstance(node.value, cst.Name) and node.value.value == name:
                subscripted += 1

        def visit_Name(self, node: cst.Name) -> None:
            nonlocal reads
            reads += node.value == name

    for small in statements:
        small.visit(_Find())
    return reads > 0 and reads == subscripted
