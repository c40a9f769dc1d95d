"""Gradient accumulation written by hand, and whether it has the one shape the migrator
rewrites to `with accelerator.accumulate(model):`.

The shape: in a loop that calls backward, the loss is divided by N (`loss = loss / N`,
`loss /= N`, `(loss / N).backward()`), and the optimizer steps under
`if (i + 1) % N == 0:` (or `i % N == 0`, optionally `or i == len(loader) - 1`), where `i`
is the loop's own enumerate() index. Anything else is described with the reason it cannot
be rewritten. A loop without such an `if` is not accumulation (a loss divided by a constant
and stepped every batch is left alone). Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from migrator.analysis.collect import Facts, LoopFact
from migrator.analysis.names import dotted_name
from migrator.analysis.roles import Role, RoleTable
from migrator.analysis.walk import walk


@dataclass(frozen=True, eq=False)
class Division:
    """A place that divides the loss by N: `node` is rewritten as `kind` says:
    "drop" (the whole statement goes), "left" (the BinaryOperation becomes its left side)."""

    node: cst.CSTNode
    kind: str


@dataclass(frozen=True, eq=False)
class Accumulation:
    loop: cst.For
    steps: str | None  # code of N
    step_if: cst.If | None
    divisions: tuple[Division, ...]
    models: tuple[str, ...]
    reason: str | None  # None: it can be rewritten
    anchor: cst.CSTNode  # where findings point

    @property
    def migratable(self) -> bool:
        return self.reason is None


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).strip()


def _statements(body: cst.BaseSuite) -> Iterator[cst.BaseStatement]:
    """Statements of a loop body, descending into with/if/try blocks but not nested loops
    or functions."""
    if not isinstance(body, cst.IndentedBlock):
        return
    for stmt in body.body:
        yield stmt
        if isinstance(stmt, (cst.With, cst.If, cst.Try)):
            yield from _statements(stmt.body)
            orelse = getattr(stmt, "orelse", None)
            while isinstance(orelse, (cst.If, cst.Else)):
                yield from _statements(orelse.body)
                orelse = getattr(orelse, "orelse", None)


def _smalls(body: cst.BaseSuite) -> Iterator[cst.BaseSmallStatement]:
    for stmt in _statements(body):
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body


def _divided(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, str] | None:
    """`x / N` → (x, code of N)."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
        right = expr.right
        if isinstance(right, (cst.Name, cst.Attribute, cst.Integer)):
            return expr.left, _code(right)
    return None


def _backward_targets(loop: cst.For) -> list[cst.BaseExpression]:
    """What each backward in the loop differentiates: the receiver of `.backward()`, the
    first argument of `accelerator.backward(...)`, the argument of `scaler.scale(...)`."""
    out: list[cst.BaseExpression] = []

    class _Find(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> bool:
            return node is loop

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if not isinstance(func, cst.Attribute) or func.attr.value != "backward":
                return
            receiver = func.value
            if node.args and (dotted_name(receiver) or "").endswith("accelerator"):
                out.append(node.args[0].value)
            elif isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value == "scale" and receiver.args:
                out.append(receiver.args[0].value)
            else:
                out.append(receiver)

    walk(loop, _Find())
    return out


def _backward_in(body: cst.BaseSuite) -> bool:
    """The block computes its own gradients before it steps (`if (i + 1) % n_critic == 0:`
    around a generator's whole update, GAN style): an update every n turns, not gradients
    gathered over n batches."""
    found = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward":
                found.append(node)

    body.visit(_Find())
    return bool(found)


def _step_condition(test: cst.BaseExpression) -> tuple[str, str] | None:
    """`(i + 1) % N == 0` (optionally `or ...len(...)...`) → (counter code, N code)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        for side, other in ((test.left, test.right), (test.right, test.left)):
            found = _step_condition(side)
            if found and "len(" in _code(other):
                return found
        return None
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return None
    target = test.comparisons[0]
    if not (isinstance(target.operator, cst.Equal) and isinstance(target.comparator, cst.Integer) and target.comparator.value == "0"):
        return None
    left = test.left
    if not (isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Modulo)):
        return None
    counter = left.left
    if isinstance(counter, cst.BinaryOperation) and isinstance(counter.operator, cst.Add) and _code(counter.right) == "1":
        counter = counter.left
    return _code(counter), _code(left.right)


def _continue_guards(loop: cst.For) -> list[tuple[cst.If, str]]:
    """`if (i + 1) % N != 0: continue` at the top level of the loop body → (the if, N)."""
    out = []
    for stmt in loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ():
        if not (isinstance(stmt, cst.If) and stmt.orelse is None and isinstance(stmt.body, cst.IndentedBlock)):
            continue
        body = stmt.body.body
        if not (len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Continue)):
            continue
        test = stmt.test
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.NotEqual):
            zero = test.with_changes(comparisons=[test.comparisons[0].with_changes(operator=cst.Equal())])
            found = _step_condition(zero)
            if found:
                out.append((stmt, found[1]))
    return out


def _loop_index(loop: cst.For) -> str | None:
    it = loop.iter
    if isinstance(it, cst.Call) and (dotted_name(it.func) or "").endswith("enumerate"):
        target = loop.target
        if isinstance(target, cst.Tuple) and target.elements:
            return dotted_name(target.elements[0].value)
    return None


def _steps_optimizer(body: cst.BaseSuite, roles: RoleTable) -> bool:
    for small in _smalls(body):
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = small.value.func
            if isinstance(func, cst.Attribute) and func.attr.value == "step":
                owner = dotted_name(func.value)
                if roles.of(owner) is Role.OPTIMIZER or (owner or "").endswith("scaler"):
                    return True
    return False


def _models_called(loop: cst.For, roles: RoleTable) -> tuple[str, ...]:
    found: list[str] = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            name = dotted_name(node.func)
            if roles.of(name) is Role.MODEL and name not in found:
                found.append(name)  # type: ignore[arg-type]

    walk(loop.body, _Find())
    return tuple(found)


def accumulations(
    facts: Facts, roles: RoleTable, backward_loops: set[int], prepared: frozenset[str] = frozenset()
) -> tuple[Accumulation, ...]:
    """Every loop that accumulates gradients by hand, rewritable or with its reason.
    `prepared` names the models accumulate() may take (not a loss module called in the
    loop)."""
    out = []
    for loop in facts.loops:
        if id(loop.node) in backward_loops:
            found = _accumulation(loop, roles, prepared)
            if found is not None:
                out.append(found)
    return tuple(out)


def _accumulation(fact: LoopFact, roles: RoleTable, prepared: frozenset[str]) -> Accumulation | None:
    loop = fact.node
    losses = _backward_targets(loop)
    loss_names = {dotted_name(t) for t in losses} - {None}
    divisions: list[Division] = []
    steps: set[str] = set()
    for target in losses:
        split = _divided(target.with_changes(lpar=[], rpar=[]) if isinstance(target, cst.BinaryOperation) else target)
        if split:
            divisions.append(Division(target, "left"))
            steps.add(split[1])
    for small in _smalls(loop.body):
        if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.DivideAssign):
            if dotted_name(small.target) in loss_names and isinstance(small.value, (cst.Name, cst.Attribute, cst.Integer)):
                divisions.append(Division(small, "drop"))
                steps.add(_code(small.value))
        elif isinstance(small, cst.Assign) and len(small.targets) == 1:
            name = dotted_name(small.targets[0].target)
            split = _divided(small.value)
            if name in loss_names and split:
                kind = "drop" if dotted_name(split[0]) == name else "left"
                divisions.append(Division(small if kind == "drop" else small.value, kind))
                steps.add(split[1])
    step_if = None
    condition = None
    for stmt in loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ():
        if isinstance(stmt, cst.If) and stmt.orelse is None and _steps_optimizer(stmt.body, roles) and not _backward_in(stmt.body):
            condition = _step_condition(stmt.test)
            if condition:
                step_if = stmt
                break
    if step_if is None or condition is None:
        guards = _continue_guards(loop)
        if not guards or not _steps_optimizer(loop.body, roles):
            return None
        guard, n = guards[0]
        reason = f"the optimizer steps after `if ... % {n} != 0: continue` rather than under an `if`"
        return Accumulation(loop, n, None, tuple(divisions), (), reason, guard)
    n = condition[1]
    called = _models_called(loop, roles)
    models = tuple(m for m in called if m in prepared)
    reason = None
    if condition[0] != _loop_index(loop):
        reason = f"the step condition counts `{condition[0]}`, not this loop's enumerate() index"
    elif not divisions:
        reason = f"the loss is not divided by `{n}`, and accelerator.backward() would divide it"
    elif steps != {n}:
        reason = f"the loss is divided by `{', '.join(sorted(steps))}` but the optimizer steps every `{n}` batches"
    elif not models and called:
        reason = f"`{called[0]}`, the model called in the loop, is not prepared in this file, so accumulate() has no prepared model to take"
    elif not models:
        reason = "no model prepared in this file is called in the loop, so there is nothing to pass to accumulate()"
    return Accumulation(loop, n, step_if, tuple(divisions), models, reason, step_if)
