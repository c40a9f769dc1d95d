"""`if ddp: A else: B` on a launched-distributed flag, once A reads the Accelerator.

Flag-style scripts run one code path with or without a launcher: `ddp = int(os.environ.get(
"RANK", -1)) != -1`, then `if ddp:` binds the rank, the device and the main-process flag
from the launcher and `else:` binds their one-process values. Once the rank plumbing reads
the Accelerator (`ddp = accelerator.num_processes > 1`, `seed_offset =
accelerator.process_index`), A is right on one process as well: there the Accelerator's
index is 0, its count 1, its process the main one. The `if` collapses to A when, on one
process, A binds every name B binds to the value B gives it (a name only B binds goes
with B when nothing else reads it). Otherwise both branches stay, each correct. Only
assignments, asserts and `//=`/`*=` by the count are read; anything else keeps the `if`.
Nothing here edits the tree.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from migrator.analysis.distributed import launch_test
from migrator.analysis.names import code_of, dotted_name

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis

# What the Accelerator's properties are on one process.
_ONE_PROCESS = {
    "process_index": "0",
    "local_process_index": "0",
    "num_processes": "1",
    "is_main_process": "True",
    "is_local_main_process": "True",
}
_ARITHMETIC = {cst.Add: operator.add, cst.Subtract: operator.sub, cst.Multiply: operator.mul,
               cst.FloorDivide: operator.floordiv, cst.Modulo: operator.mod}
_COMPARE = {cst.Equal: operator.eq, cst.NotEqual: operator.ne, cst.LessThan: operator.lt,
            cst.GreaterThan: operator.gt, cst.LessThanEqual: operator.le, cst.GreaterThanEqual: operator.ge}


@dataclass(frozen=True, eq=False)
class FlagBranch:
    """`node` (an if/else on the flag) collapses to `kept`, the distributed branch's statements."""

    node: cst.If
    test: str
    kept: tuple[cst.BaseStatement, ...]


def flag_branches(analysis: "ScriptAnalysis") -> list[FlagBranch]:
    out = []
    for node in analysis.facts.by_type.get("If", ()):
        assert isinstance(node, cst.If)
        if not isinstance(node.orelse, cst.Else):
            continue
        distributed = _flag_test(analysis, node)
        if distributed is None:
            continue
        a, b = (node.body, node.orelse.body) if distributed else (node.orelse.body, node.body)
        if _collapses(analysis, node, a, b):
            out.append(FlagBranch(node, code_of(node.test), tuple(a.body)))  # type: ignore[attr-defined]
    return out


def same_flag_choices(analysis: "ScriptAnalysis") -> list[cst.IfExp]:
    """`x if ddp else x`: once both sides read the Accelerator
    (`accelerator.unwrap_model(model).state_dict()` from `model.module.state_dict()` and
    `model.state_dict()`), the choice on the flag is no choice."""
    out = []
    for node in analysis.facts.by_type.get("IfExp", ()):
        assert isinstance(node, cst.IfExp)
        if _flag_test(analysis, node) is not None and code_of(node.body) == code_of(node.orelse):
            out.append(node)
    return out


def _flag_test(analysis: "ScriptAnalysis", node: cst.If | cst.IfExp) -> bool | None:
    """True when the `if` tests that several processes run (its body is the distributed
    branch), False for the negation, None for any other test."""
    test = node.test
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _flag_value(analysis, node, test.expression)
        return None if inner is None else not inner
    return _flag_value(analysis, node, test)


def _flag_value(analysis: "ScriptAnalysis", node: cst.CSTNode, test: cst.BaseExpression) -> bool | None:
    if isinstance(test, cst.Comparison):
        return launch_test(test, accelerator=True)
    if not isinstance(test, cst.Name):
        return None
    scope = analysis.scope_of(node)
    bindings = [b for b in analysis.facts.bindings if b.name == test.value and b.scope is scope]
    if len(bindings) != 1 or bindings[0].element is not None or not isinstance(bindings[0].value, cst.Comparison):
        return None
    return launch_test(bindings[0].value, accelerator=True)


def _collapses(analysis: "ScriptAnalysis", node: cst.If, a: cst.BaseSuite, b: cst.BaseSuite) -> bool:
    kept = _one_process_run(a, other=False)
    dropped = _one_process_run(b, other=True)
    if kept is None or dropped is None:
        return False
    scope = analysis.scope_of(node)
    for name, value in dropped.items():
        if name in kept:
            if kept[name] != value:
                return False
            continue
        # bound only by the branch that goes: nothing else may read it
        for load in analysis.facts.loads:
            if load.name == name and load.scope is scope and not _inside(analysis, load.node, node):
                return False
    return True


def _inside(analysis: "ScriptAnalysis", inner: cst.CSTNode, outer: cst.CSTNode) -> bool:
    current: cst.CSTNode | None = inner
    while current is not None:
        if current is outer:
            return True
        current = analysis.parent(current)
    return False


def _one_process_run(suite: cst.BaseSuite, other: bool) -> dict[str, str] | None:
    """name → its value on one process after the branch runs, or None when the branch does
    anything but bind names (`other`: the one-process branch, which may only assign)."""
    if not isinstance(suite, cst.IndentedBlock):
        return None
    env: dict[str, str] = {}
    for line in suite.body:
        if not isinstance(line, cst.SimpleStatementLine):
            return None
        for small in line.body:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                value = _value(small.value, env)
                if value is None:
                    return None
                env[small.targets[0].target.value] = value
                continue
            if other:
                return None
            if isinstance(small, cst.Assert) and small.msg is None and _value(small.test, env) == "True":
                continue  # `assert steps % world_size == 0` holds on one process
            if (
                isinstance(small, cst.AugAssign)
                and isinstance(small.operator, (cst.FloorDivideAssign, cst.MultiplyAssign))
                and isinstance(small.target, cst.Name)
                and small.target.value not in env
                and _value(small.value, env) == "1"
            ):
                continue  # `steps //= world_size` divides by 1 on one process
            return None
    return env


def _value(expr: cst.BaseExpression, env: dict[str, str]) -> str | None:
    """The expression's value on one process, as code; None when it calls anything or
    cannot be read."""
    if isinstance(expr, (cst.Integer, cst.SimpleString, cst.Float)):
        return code_of(expr)
    if isinstance(expr, cst.Name):
        return env.get(expr.value, expr.value)
    if isinstance(expr, cst.Attribute):
        name = dotted_name(expr)
        if name is None or name.split(".")[0] in env:
            return None
        owner = dotted_name(expr.value) or ""
        if owner.rsplit(".", 1)[-1] == "accelerator" and expr.attr.value in _ONE_PROCESS:
            return _ONE_PROCESS[expr.attr.value]
        return name
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = _value(expr.expression, env)
        return None if inner is None or not _int(inner) else str(-int(inner))
    if isinstance(expr, cst.BinaryOperation):
        left, right = _value(expr.left, env), _value(expr.right, env)
        op = _ARITHMETIC.get(type(expr.operator))
        if left is None or right is None or op is None:
            return None
        if _int(left) and _int(right) and not (int(right) == 0 and op in (operator.floordiv, operator.mod)):
            return str(op(int(left), int(right)))
        if right == "1" and op in (operator.mul, operator.floordiv):
            return left
        if right == "1" and op is operator.mod:
            return "0"
        if left == "1" and op is operator.mul:
            return right
        return None
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        left, right = _value(expr.left, env), _value(expr.comparisons[0].comparator, env)
        compare = _COMPARE.get(type(expr.comparisons[0].operator))
        if left is None or right is None or compare is None or not (_int(left) and _int(right)):
            return None
        return str(compare(int(left), int(right)))
    return None


def _int(code: str) -> bool:
    return code.lstrip("-").isdigit()
