"""A read-only walk of a LibCST tree: the same nodes, order and callbacks as
`node.visit(visitor)` for a `cst.CSTVisitor`, without rebuilding the tree.

LibCST's `visit` reconstructs every node it passes (each `_visit_and_replace_children`
calls the node's constructor, which validates it), even for a visitor that changes
nothing: a walk cost about four times a codegen of the same module. Analyses and rules
only read, so they walk with `walk()` here; transformers keep LibCST's `visit`.

Children come in the order LibCST's own `_visit_and_replace_children` visits them (which
is lexical order, e.g. a Call's `lpar` before its `func`). That order is read once per
node class from the method's source; where the source cannot be read, LibCST's
`children` property gives the same order, slowly. Attribute callbacks
(`visit_Call_func`) are not made: no visitor of ours defines one.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Iterator

import libcst as cst

_VISITS = frozenset({
    "visit_required", "visit_optional", "visit_sentinel", "visit_iterable",
    "visit_sequence", "visit_body_iterable", "visit_body_sequence",
})
_FIELDS: dict[type, tuple[str, ...] | None] = {}
_Node = cst.CSTNode
_Sentinel = cst.MaybeSentinel


def _fields(cls: type) -> tuple[str, ...] | None:
    """The fields `cls._visit_and_replace_children` visits, in its order; None when its
    source cannot be read."""
    try:
        source = textwrap.dedent(inspect.getsource(cls._visit_and_replace_children))  # type: ignore[attr-defined]
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    calls = [
        n for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _VISITS
        and len(n.args) > 1 and isinstance(n.args[1], ast.Constant)
    ]
    calls.sort(key=lambda n: (n.lineno, n.col_offset))  # evaluation order of the constructor's arguments
    names: list[str] = []
    for call in calls:
        name = call.args[1].value  # type: ignore[attr-defined]
        if name not in names:
            names.append(name)
    return tuple(names)


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The node's direct children, in visiting order (as `node.children`, cheaply)."""
    cls = type(node)
    try:
        names = _FIELDS[cls]
    except KeyError:
        names = _FIELDS[cls] = _fields(cls)
    if names is None:
        return list(node.children)
    out: list[cst.CSTNode] = []
    for name in names:
        value = getattr(node, name)
        if isinstance(value, _Node):
            out.append(value)
        elif value is not None and not isinstance(value, _Sentinel):
            out.extend(value)
    return out


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """`node.visit(visitor)` for a read-only visitor: `on_visit` (its `visit_<Type>`),
    the children unless it returned False, then `on_leave` (its `leave_<Type>`)."""
    if visitor.on_visit(node):
        for child in children(node):
            walk(child, visitor)
    visitor.on_leave(node)


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every node under it, in pre-order (document order)."""
    stack = [node]
    pop, extend = stack.pop, stack.extend
    while stack:
        current = pop()
        yield current
        extend(reversed(children(current)))


def contains(outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
    """`inner` is `outer` or sits under it."""
    return any(node is inner for node in descendants(outer))
