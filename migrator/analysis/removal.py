"""What to delete when a statement goes: the statement, or the `if` around it that would
be left with nothing but `pass`.

`if args.distributed:` holding only `dist.init_process_group(...)` should go with it, and
so should `if torch.cuda.device_count() > 1:` holding only `model = nn.DataParallel(model)`.
Several rules remove statements of one such `if`; they share one Fix built here, so the
engine applies it once and every finding that asked for it is marked fixed. Nothing here
edits the tree.
"""

from __future__ import annotations

from typing import Callable, Iterable

import libcst as cst

from migrator.analysis.names import ImportTable, dotted_name
from migrator.analysis.walk import walk
from migrator.edits import Edit, Fix, ImportChange, remove

Parent = Callable[[cst.CSTNode], "cst.CSTNode | None"]

# Calls that only look at the environment: an `if` testing them may go with its body.
_PURE_CALLS = {
    "torch.cuda.is_available", "torch.cuda.device_count", "torch.distributed.is_initialized",
    "torch.distributed.is_available", "torch.backends.mps.is_available", "os.environ.get", "os.getenv",
}
_PURE_BUILTINS = {"len", "hasattr", "isinstance", "int", "bool", "getattr"}


def is_pure_test(test: cst.BaseExpression, imports: ImportTable) -> bool:
    """A condition without side effects: names, attributes, comparisons, and calls that
    only look at the environment (`torch.cuda.device_count()`)."""
    pure = True

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal pure
            qualified = imports.qualify(node.func) or ""
            if qualified not in _PURE_CALLS and dotted_name(node.func) not in _PURE_BUILTINS:
                pure = False

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            nonlocal pure
            pure = False

    walk(test, _Find())
    return pure


def line_of_small(small: cst.CSTNode, parent: Parent) -> cst.CSTNode:
    """The SimpleStatementLine holding `small` when it is alone there, else `small`."""
    line = parent(small)
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
        return line
    return small


def _branch_of_small(small: cst.CSTNode, parent: Parent) -> cst.CSTNode:
    """`line_of_small`, or the one-line body after a colon (`if c: x = 1`) when `small`
    is alone there: the unit an `if` counts as its branch."""
    line = parent(small)
    if isinstance(line, cst.SimpleStatementSuite) and len(line.body) == 1:
        return line
    return line_of_small(small, parent)


def removal_unit(
    node: cst.CSTNode, parent: Parent, imports: ImportTable, going: Callable[[cst.CSTNode], bool] = lambda s: False
) -> cst.CSTNode:
    """The node to delete so that `node` (a small statement or a statement line) goes:
    the enclosing `if` (side-effect-free test) when every statement of its body, and of
    its `else`, goes too (`going(statement)` says which others do), climbing while that
    holds."""
    start = _branch_of_small(node, parent) if isinstance(node, cst.BaseSmallStatement) else node
    unit = _climb(start, parent, imports, going)
    # A one-line body cannot go alone (its `if` needs one): the statement goes, `pass` stays.
    return node if isinstance(unit, cst.SimpleStatementSuite) else unit


def _climb(
    current: cst.CSTNode, parent: Parent, imports: ImportTable, going: Callable[[cst.CSTNode], bool]
) -> cst.CSTNode:
    while True:
        if isinstance(current, cst.SimpleStatementSuite):  # `if c: x = 1`: the whole branch
            siblings, owner = [current], parent(current)
        else:
            block = parent(current)
            if not isinstance(block, cst.IndentedBlock):
                return current
            siblings, owner = list(block.body), parent(block)
        if isinstance(owner, cst.Else):
            if all(s is current or going(s) for s in siblings):
                up = parent(owner)
                if isinstance(up, cst.If) and not all(going(s) for s in _branch_statements(up, with_else=False)):
                    return owner  # the else goes, the if stays
            owner = parent(owner)
        if not (isinstance(owner, cst.If) and is_pure_test(owner.test, imports)):
            return current
        if not all(s is current or going(s) for s in _branch_statements(owner)):
            return current
        if not isinstance(parent(owner), (cst.IndentedBlock, cst.Module, cst.If)):
            return current
        current = owner
        if isinstance(parent(owner), cst.If):
            return owner  # an elif with everything in it gone: the elif goes


def _branch_statements(statement: cst.If, with_else: bool = True) -> list[cst.CSTNode]:
    """The statements of an `if` and of its `else` (an `elif` counts as one statement)."""
    out = list(statement.body.body) if isinstance(statement.body, cst.IndentedBlock) else [statement.body]
    orelse = statement.orelse if with_else else None
    if isinstance(orelse, cst.Else):
        body = orelse.body
        out += list(body.body) if isinstance(body, cst.IndentedBlock) else [body]
    elif orelse is not None:
        out.append(orelse)  # an elif: never "going"
    return out


def shared_removals(
    smalls: Iterable[cst.BaseSmallStatement],
    parent: Parent,
    imports: ImportTable,
    remove_imports: tuple[ImportChange, ...] = (),
    companions: dict[int, list[Edit]] | None = None,
    together: Iterable[Iterable[cst.BaseSmallStatement]] = (),
) -> dict[int, Fix]:
    """id(small statement) → the one Fix that deletes it, shared by every statement that
    goes with the same enclosing `if`, and by the statements `together` says must go at
    once (a sampler and its `set_epoch` calls). `companions` are edits that must happen
    with a statement's removal (the DataLoader's `sampler=` argument when the sampler goes):
    they join that Fix, so a name never disappears while something still reads it."""
    smalls = list(smalls)
    companions = companions or {}
    lines = {id(_branch_of_small(s, parent)) for s in smalls}

    def going(statement: cst.CSTNode) -> bool:
        if id(statement) in lines:
            return True
        if isinstance(statement, cst.If):
            return all(going(s) for s in _branch_statements(statement)) and is_pure_test(statement.test, imports)
        return False

    unit_of = {id(s): removal_unit(s, parent, imports, going) for s in smalls}
    group: dict[int, int] = {key: key for key in (id(u) for u in unit_of.values())}

    def find(key: int) -> int:
        while group[key] != key:
            group[key] = group[group[key]]
            key = group[key]
        return key

    for members in together:
        keys = [id(unit_of[id(s)]) for s in members if id(s) in unit_of]
        for key in keys[1:]:
            group[find(key)] = find(keys[0])
    units: dict[int, dict[int, cst.CSTNode]] = {}
    members_of: dict[int, list[cst.BaseSmallStatement]] = {}
    for small in smalls:
        unit = unit_of[id(small)]
        root = find(id(unit))
        units.setdefault(root, {})[id(unit)] = unit
        members_of.setdefault(root, []).append(small)
    out: dict[int, Fix] = {}
    for root, nodes in units.items():
        extra = [e for small in members_of[root] for e in companions.get(id(small), [])]
        fix = Fix((*(remove(n) for n in nodes.values()), *extra), remove_imports=remove_imports)
        for small in members_of[root]:
            out[id(small)] = fix
    return out


def import_removals(imports: ImportTable, local: str) -> list[ImportChange]:
    """Removal requests for the import that binds `local` (dropped only if unused once
    the pass is applied): both spellings, `import a.b as x` and `from a import b as x`,
    since the import table keeps only the qualified name."""
    qualified = imports.aliases.get(local)
    if qualified is None or qualified == local:
        return []
    module, _, name = qualified.rpartition(".")
    alias = local if local != name else None
    out = [ImportChange(module, name, alias)] if module else []
    out.append(ImportChange(qualified, None, local))
    return out
