"""Apply the import requests of accepted fixes: add `from X import Y` once, drop
requested imports that nothing reads any more.

Our own small pass rather than LibCST's AddImportsVisitor/RemoveImportsVisitor: those
run as codemods (a deep copy of the tree into a MetadataWrapper, and full scope analysis
for removals), which was half the time of a migration. The requests rules make are
narrow, so the pass is too.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import libcst as cst

from migrator.analysis.names import dotted_name
from migrator.edits import Fix

Request = tuple[str, "str | None", "str | None"]  # (module, name or None, alias or None)


def apply_imports(module: cst.Module, fixes: Sequence[Fix]) -> cst.Module:
    """Drop requested imports left unused, then add requested ones not already there."""
    adds = {(i.module, i.name, i.alias) for f in fixes for i in f.add_imports}
    removes = {(i.module, i.name, i.alias) for f in fixes for i in f.remove_imports}
    if removes:
        module = _remove_unused(module, removes, _names_read(module))
    if adds:
        module = _add(module, sorted(adds, key=str))
    return module


class _Reads(cst.CSTVisitor):
    """Every name read anywhere, outside import statements (attribute tails and keyword
    names are not reads of a name)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> bool:
        return not _import_error(node)  # `except ImportError: amp = None` goes with its import

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = node.evaluated_value  # names listed in __all__ or string annotations
        if isinstance(value, str) and value.isidentifier():
            self.names.add(value)


def _names_read(module: cst.Module) -> set[str]:
    reads = _Reads()
    module.visit(reads)
    return reads.names


def _local(alias: cst.ImportAlias, from_import: bool) -> str:
    if alias.asname is not None:
        return dotted_name(alias.asname.name) or ""
    name = dotted_name(alias.name) or ""
    return name if from_import else name.split(".")[0]


class _Remover(cst.CSTTransformer):
    def __init__(self, removes: set[Request], read: set[str]) -> None:
        super().__init__()
        self._removes = removes
        self._read = read

    def _drop(self, alias: cst.ImportAlias, module: str, from_import: bool) -> bool:
        local = _local(alias, from_import)
        if local in self._read:
            return False
        name = dotted_name(alias.name)
        asname = dotted_name(alias.asname.name) if alias.asname else None
        if from_import:
            return (module, name, asname) in self._removes
        return (name, None, asname) in self._removes

    def leave_Import(self, original: cst.Import, updated: cst.Import):
        kept = [a for a in updated.names if not self._drop(a, "", False)]
        return _with_names(updated, kept)

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom):
        if isinstance(updated.names, cst.ImportStar) or updated.relative:
            return updated
        module = dotted_name(updated.module) if updated.module else ""
        kept = [a for a in updated.names if not self._drop(a, module or "", True)]
        return _with_names(updated, kept)

    def leave_SimpleStatementLine(self, original, updated):
        return cst.RemovalSentinel.REMOVE if not updated.body else updated

    def leave_IndentedBlock(self, original, updated):
        if not updated.body:
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated

    def leave_Try(self, original: cst.Try, updated: cst.Try):
        """`try: from apex import amp` / `except ImportError: amp = None` goes whole once
        its imports have: what it guarded is no longer imported."""
        emptied = updated.body.deep_equals(cst.IndentedBlock([cst.SimpleStatementLine([cst.Pass()])]))
        if emptied and not original.body.deep_equals(updated.body) and updated.orelse is None and updated.finalbody is None:
            if updated.handlers and all(_import_error(h) for h in updated.handlers):
                return cst.RemovalSentinel.REMOVE
        return updated


_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def _import_error(handler: cst.ExceptHandler) -> bool:
    """`except ImportError:` (or ModuleNotFoundError, or a tuple of them)."""
    kind = handler.type
    kinds = [e.value for e in kind.elements] if isinstance(kind, cst.Tuple) else [kind]
    return kind is not None and all(isinstance(k, cst.Name) and k.value in _IMPORT_ERRORS for k in kinds)


def _with_names(node, kept: list[cst.ImportAlias]):
    if len(kept) == len(node.names):
        return node
    if not kept:
        return cst.RemovalSentinel.REMOVE
    kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return node.with_changes(names=kept)


def _remove_unused(module: cst.Module, removes: set[Request], read: set[str]) -> cst.Module:
    updated = module.visit(_Remover(removes, read))
    if module.body and updated.body and not module.header and updated.body[0] is not module.body[0]:
        # the file's first line went (`import os`): the blank line that followed it would open the file
        first = updated.body[0]
        lines = list(getattr(first, "leading_lines", ()))
        while lines and lines[0].comment is None:
            lines.pop(0)
        if hasattr(first, "leading_lines"):
            updated = updated.with_changes(body=[first.with_changes(leading_lines=lines), *updated.body[1:]])
    return updated


def _add(module: cst.Module, adds: Iterable[Request]) -> cst.Module:
    """`from X import Y` for each request not already imported: added to an existing
    `from X import ...` at the top, else as a new statement after the leading imports
    (where LibCST's AddImportsVisitor puts it)."""
    body = list(module.body)
    for mod, name, alias in adds:
        if name is None:  # `import mod` (the spawn's direct call reads os.environ)
            if not _module_imported(body, mod, alias):
                names = [cst.ImportAlias(cst.parse_expression(mod), asname=cst.AsName(cst.Name(alias)) if alias else None)]
                body.insert(_insertion_index(body), cst.SimpleStatementLine([cst.Import(names=names)]))
            continue
        if _already_imported(body, mod, name, alias):
            continue
        new_alias = cst.ImportAlias(cst.Name(name), asname=cst.AsName(cst.Name(alias)) if alias else None)
        index = _existing_from(body, mod)
        if index is not None:
            line = body[index]
            statement = line.body[0]
            names = list(statement.names)
            names[-1] = names[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            body[index] = line.with_changes(body=[statement.with_changes(names=[*names, new_alias])])
            continue
        statement = cst.SimpleStatementLine([cst.ImportFrom(module=cst.parse_expression(mod), names=[new_alias])])
        body.insert(_insertion_index(body), statement)
    return module.with_changes(body=_spaced(body))


def _spaced(body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """Two blank lines between the last leading import and a class or function right
    below it (a file that had no import: `import torch` then `class Train:`)."""
    last = max((i for i, _ in _top_imports(body)), default=None)
    if last is None or last + 1 >= len(body):
        return body
    below = body[last + 1]
    if isinstance(below, (cst.ClassDef, cst.FunctionDef)) and not below.leading_lines:
        body[last + 1] = below.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    return body


def _top_imports(body: list[cst.BaseStatement]) -> Iterable[tuple[int, cst.BaseSmallStatement]]:
    for i, line in enumerate(body):
        if isinstance(line, cst.SimpleStatementLine):
            for small in line.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    yield i, small


def _module_imported(body, mod: str, alias: str | None) -> bool:
    """`import mod` (as `alias`) among the leading imports."""
    for _, small in _top_imports(body):
        if isinstance(small, cst.Import):
            for a in small.names:
                asname = dotted_name(a.asname.name) if a.asname else None
                if dotted_name(a.name) == mod and asname == alias:
                    return True
    return False


def _already_imported(body, mod: str, name: str, alias: str | None) -> bool:
    for _, small in _top_imports(body):
        if isinstance(small, cst.ImportFrom) and not small.relative and not isinstance(small.names, cst.ImportStar):
            if small.module is not None and dotted_name(small.module) == mod:
                for a in small.names:
                    asname = dotted_name(a.asname.name) if a.asname else None
                    if dotted_name(a.name) == name and asname == alias:
                        return True
    return False


def _existing_from(body, mod: str) -> int | None:
    """A plain one-statement `from mod import a, b` line to extend (not starred, not
    parenthesised over several lines, not `__future__`)."""
    for i, small in _top_imports(body):
        if (
            isinstance(small, cst.ImportFrom)
            and not small.relative
            and not isinstance(small.names, cst.ImportStar)
            and small.lpar is None
            and small.module is not None
            and dotted_name(small.module) == mod
            and len(body[i].body) == 1
        ):
            return i
    return None


def _insertion_index(body: list[cst.BaseStatement]) -> int:
    """After the module docstring and the leading run of imports."""
    index = 0
    for i, line in enumerate(body):
        if not isinstance(line, cst.SimpleStatementLine):
            break
        if all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in line.body):
            index = i + 1
        elif i == 0 and isinstance(line.body[0], cst.Expr) and isinstance(line.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            index = 1
        else:
            break
    return index
