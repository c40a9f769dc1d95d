"""Edits that rules ask for, how overlapping ones are resolved, and the one transformer that applies them.

Rules never modify the tree: they describe an Edit against a node of the tree they were
shown, and the engine applies the accepted ones here, matched by node identity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence, Union

import libcst as cst

from migrator.comments import CarriedComments

Replacement = Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel]


@dataclass(frozen=True, eq=False)
class Edit:
    """Replace `node` (unless `replacement` is None) and/or put statements around it.

    `before`/`after` are only valid when `node` is a statement in a block.
    """

    node: cst.CSTNode
    replacement: Replacement | None = None
    before: tuple[cst.BaseStatement, ...] = ()
    after: tuple[cst.BaseStatement, ...] = ()

    @property
    def replaces(self) -> bool:
        return self.replacement is not None


@dataclass(frozen=True)
class ImportChange:
    """`from module import name` (or `import module` when name is None), added or
    removed-if-unused once per pass by LibCST's import visitors."""

    module: str
    name: str | None = None
    alias: str | None = None


@dataclass(frozen=True, eq=False)
class Fix:
    """An atomic group of edits: applied whole or not at all. Identity matters: several
    findings may share one Fix (e.g. two moves in one statement)."""

    edits: tuple[Edit, ...]
    add_imports: tuple[ImportChange, ...] = ()
    remove_imports: tuple[ImportChange, ...] = ()
    unsafe: bool = False


def replace(node: cst.CSTNode, new: Replacement) -> Edit:
    return Edit(node, replacement=new)


def remove(node: cst.CSTNode) -> Edit:
    return Edit(node, replacement=cst.RemovalSentinel.REMOVE)


def insert_before(stmt: cst.CSTNode, *new: cst.BaseStatement) -> Edit:
    return Edit(stmt, before=tuple(new))


def insert_after(stmt: cst.CSTNode, *new: cst.BaseStatement) -> Edit:
    return Edit(stmt, after=tuple(new))


@dataclass
class _Span:
    start: tuple[int, int]
    end: tuple[int, int]

    def overlaps(self, other: "_Span") -> bool:
        return self.start < other.end and other.start < self.end


@dataclass
class EditPlan:
    """The accepted fixes of one pass, checked pairwise for overlap.

    A replacement owns its node's whole range; an insertion only touches the gap around
    its statement, so it clashes only with a replacement of an enclosing node.
    """

    span_of: "callable"
    accepted: list[Fix] = field(default_factory=list)
    _replaced: list[tuple[cst.CSTNode, _Span]] = field(default_factory=list)
    _anchored: list[tuple[cst.CSTNode, _Span]] = field(default_factory=list)

    def try_accept(self, fix: Fix) -> bool:
        """Accept `fix` unless it clashes with one already accepted (the caller defers it)."""
        if any(f is fix for f in self.accepted):
            return True
        spans = [(e, self._span(e.node)) for e in fix.edits]
        for edit, span in spans:
            if self._clashes(edit, span):
                return False
        for edit, span in spans:
            (self._replaced if edit.replaces else self._anchored).append((edit.node, span))
        self.accepted.append(fix)
        return True

    def _span(self, node: cst.CSTNode) -> _Span:
        rng = self.span_of(node)
        return _Span((rng.start.line, rng.start.column), (rng.end.line, rng.end.column))

    def _clashes(self, edit: Edit, span: _Span) -> bool:
        for node, other in self._replaced:
            if node is edit.node:
                if edit.replaces:
                    return True
                continue
            if not edit.replaces:
                if _contains(other, span):  # an insertion clashes only with an enclosing replacement
                    return True
                continue
            if span.overlaps(other) or (span.start == span.end == other.start):
                return True
        if edit.replaces:
            for node, other in self._anchored:
                if node is not edit.node and _contains(span, other):
                    return True
        return False


def _contains(outer: _Span, inner: _Span) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end and outer != inner


class _Applier(cst.CSTTransformer):
    def __init__(self, edits: Iterable[Edit], descend: set[int] | None = None) -> None:
        super().__init__()
        self._descend = descend  # None: every node; else only these (by id)
        self._replacement: dict[int, Replacement] = {}
        self._before: dict[int, list[cst.BaseStatement]] = {}
        self._after: dict[int, list[cst.BaseStatement]] = {}
        self._comments = CarriedComments()
        for edit in edits:
            key = id(edit.node)
            if edit.replaces:
                self._replacement[key] = edit.replacement
            if edit.before:
                self._before.setdefault(key, []).extend(edit.before)
            if edit.after:
                self._after.setdefault(key, []).extend(edit.after)

    def on_visit(self, node: cst.CSTNode) -> bool:
        self._comments.enter(node)
        if self._descend is not None and id(node) not in self._descend:
            return False  # nothing to change below: kept as it is, not rebuilt
        return super().on_visit(node)

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
        return self._comments.leave(original, self._leave(original, updated))

    def _leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        key = id(original)
        result = self._replacement.get(key, updated)
        before, after = self._before.get(key), self._after.get(key)
        if before or after:
            middle: list = []
            if isinstance(result, cst.FlattenSentinel):
                middle = list(result.nodes)
            elif not isinstance(result, cst.RemovalSentinel):
                middle = [result]
            result = cst.FlattenSentinel([*(before or []), *middle, *(after or [])])
        if isinstance(result, cst.CSTNode) and result is not updated:
            return result
        if result is updated:
            return super().on_leave(original, updated)
        return result

    def leave_IndentedBlock(
        self, original: cst.IndentedBlock, updated: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        if not updated.body:
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated

    def leave_SimpleStatementLine(self, original, updated):
        if not updated.body:
            return cst.RemovalSentinel.REMOVE
        return updated

    def leave_SimpleStatementSuite(self, original, updated):
        if not updated.body:
            return updated.with_changes(body=[cst.Pass()])
        return updated


def apply_edits(
    module: cst.Module, fixes: Sequence[Fix], parents: Mapping[cst.CSTNode, cst.CSTNode] | None = None
) -> cst.Module:
    """Apply every edit of the accepted fixes in one traversal. With `parents` (child →
    parent for every node of `module`), the traversal enters only the nodes on the way to
    an edited node: the rest of the module is kept as it is instead of rebuilt node by node."""
    edits = [e for fix in fixes for e in fix.edits]
    if not edits:
        return module
    descend = _on_the_way(module, edits, parents) if parents is not None else None
    return module.visit(_Applier(edits, descend))


def _on_the_way(module: cst.Module, edits: Sequence[Edit], parents: Mapping[cst.CSTNode, cst.CSTNode]) -> set[int] | None:
    """The ids of the nodes the applier must enter: the ancestors of every edited node, and
    every node of the module that an edit puts back in (with what is around and under it),
    so that the module's copy of it is rebuilt as before and no node object ends up twice
    in the result. None (enter everything) when an edited node is not in `module`."""
    from migrator.analysis.walk import children, descendants  # analysis imports this module

    descend: set[int] = set()

    def enter_path(node: cst.CSTNode | None) -> None:
        while node is not None and id(node) not in descend:
            descend.add(id(node))
            node = parents.get(node)

    for edit in edits:
        if edit.node is not module and edit.node not in parents:
            return None
        enter_path(parents.get(edit.node))
        replacement = edit.replacement
        stack: list[cst.CSTNode] = [*edit.before, *edit.after]
        if isinstance(replacement, cst.CSTNode):
            stack.append(replacement)
        elif isinstance(replacement, cst.FlattenSentinel):
            stack.extend(replacement.nodes)
        while stack:
            node = stack.pop()
            if node in parents or node is module:
                enter_path(node)
                descend.update(id(n) for n in descendants(node))
            else:
                stack.extend(children(node))
    return descend
