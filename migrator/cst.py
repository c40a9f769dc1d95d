"""Node builders and matchers shared by rules (so rules never import each other)."""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from migrator.analysis.names import dotted_name

LINE_LIMIT = 88


def attr_call(owner: str, method: str, args: Sequence[cst.Arg] = ()) -> cst.Call:
    """`owner.method(args)` with args copied as given."""
    return cst.Call(func=cst.Attribute(value=cst.parse_expression(owner), attr=cst.Name(method)), args=list(args))


def with_clean_commas(args: Sequence[cst.Arg]) -> list[cst.Arg]:
    """Args with the last trailing comma dropped, so they can be re-placed in a call."""
    out = list(args)
    if out:
        out[-1] = out[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return out


def assignment(targets: Sequence[str], value: str, indent: str = "") -> cst.SimpleStatementLine:
    """`a, b = value`, wrapped black-style when the line would pass LINE_LIMIT."""
    lhs = ", ".join(targets)
    code = f"{lhs} = {value}"
    if len(indent) + len(code) > LINE_LIMIT and "(" in value:
        head, _, rest = value.partition("(")
        inner = rest[:-1]
        code = f"{lhs} = {head}(\n    {inner}\n)"
    statement = cst.parse_statement(code + "\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    return statement


def prepare_statement(accelerator: str, names: Sequence[str], indent: str = "") -> cst.SimpleStatementLine:
    """`a, b = accelerator.prepare(a, b)`."""
    return assignment(names, f"{accelerator}.prepare({', '.join(names)})", indent)


def is_noop(small: cst.BaseSmallStatement) -> bool:
    """A statement that does nothing once device moves are gone: `x = x`, `a, b = a, b`,
    a bare name (`model`), `batch = {k: v for k, v in batch.items()}`, `xs = [x for x in xs]`."""
    if isinstance(small, cst.Expr):
        return dotted_name(small.value) is not None
    if not isinstance(small, cst.Assign) or len(small.targets) != 1:
        return False
    target, value = small.targets[0].target, small.value
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
        left = [dotted_name(e.value) for e in target.elements]
        right = [dotted_name(e.value) for e in value.elements]
        return None not in left and left == right
    name = dotted_name(target)
    if name is None:
        return False
    if dotted_name(value) == name:
        return True
    return _identity_comprehension(value, name)


def _identity_comprehension(value: cst.BaseExpression, name: str) -> bool:
    if isinstance(value, cst.Call) and dotted_name(value.func) in {"tuple", "list"} and len(value.args) == 1:
        value = value.args[0].value
    if isinstance(value, cst.DictComp):
        comp = value.for_in
        if comp.inner_for_in or comp.ifs or not isinstance(comp.target, cst.Tuple):
            return False
        names = [dotted_name(e.value) for e in comp.target.elements]
        source = comp.iter
        return (
            len(names) == 2
            and dotted_name(value.key) == names[0]
            and dotted_name(value.value) == names[1]
            and isinstance(source, cst.Call)
            and dotted_name(source.func) == f"{name}.items"
        )
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        comp = value.for_in
        return (
            not comp.inner_for_in
            and not comp.ifs
            and dotted_name(comp.target) is not None
            and dotted_name(value.elt) == dotted_name(comp.target)
            and dotted_name(comp.iter) == name
        )
    return False


def removal_node(line: cst.CSTNode, small: cst.BaseSmallStatement) -> cst.CSTNode:
    """What to remove to delete `small`: the whole line when it is alone on it."""
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
        return line
    return small


def block_indent(module: cst.Module, depth: int) -> str:
    return module.default_indent * depth


def adjacent_runs(entries: Sequence[tuple], parent) -> list[list[tuple]]:
    """`entries` (tuples whose second item is a statement, in document order) grouped
    into runs of statements that follow one another in one block, with no blank line or
    comment between them: what one `if`/`with` put around them can hold together."""
    groups: list[list[tuple]] = []
    for entry in entries:
        if groups and _next_to(groups[-1][-1][1], entry[1], parent):
            groups[-1].append(entry)
        else:
            groups.append([entry])
    return groups


def wrap_statements(statements: Sequence[cst.BaseStatement], wrapper) -> list[tuple[cst.CSTNode, object]]:
    """(node, replacement) pairs that put `statements` (adjacent, one block) inside one
    compound statement: `wrapper(body)` builds it around an IndentedBlock body; the first
    statement's leading comments and blank lines stay above it, the others are removed."""
    distinct: list[cst.BaseStatement] = []
    for statement in statements:
        if not any(statement is seen for seen in distinct):
            distinct.append(statement)
    first = distinct[0]
    body = cst.IndentedBlock([first.with_changes(leading_lines=[]), *distinct[1:]])  # type: ignore[list-item]
    compound = wrapper(body).with_changes(leading_lines=first.leading_lines)  # type: ignore[attr-defined]
    return [(first, compound), *((s, cst.RemovalSentinel.REMOVE) for s in distinct[1:])]


def _next_to(first: cst.CSTNode, second: cst.CSTNode, parent) -> bool:
    if first is second:
        return True
    block = parent(first)
    if block is None or block is not parent(second):
        return False
    body = list(getattr(block, "body", ()))
    index = next((k for k, s in enumerate(body) if s is first), None)
    return (
        index is not None and index + 1 < len(body) and body[index + 1] is second
        and not getattr(second, "leading_lines", ())
    )
