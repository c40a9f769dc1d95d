"""Where every node of a module is: LibCST's PositionProvider, computed more cheaply.

The positions are the same as `MetadataWrapper(module).resolve(PositionProvider)` gives
(tests/migrator/test_positions.py holds them equal): a codegen of the module that notes
where each node starts and ends, with the syntactic extents LibCST's nodes declare
through `record_syntactic_position`. What costs less here: a token without a line break
only moves the column (LibCST splits every token on a regular expression), the extents
are recorded by a small context-manager object instead of a generator, and a position
becomes a CodeRange only when asked for. Computing the table this way also skips the
batched pass over the whole module that `MetadataWrapper.resolve` runs even when no
batchable provider needs it.
"""

from __future__ import annotations

from typing import Iterator, Mapping

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

_Span = tuple  # (start line, start column, end line, end column)


class Positions(Mapping[cst.CSTNode, CodeRange]):
    """node → CodeRange (1-based lines, 0-based columns), made on first use."""

    def __init__(self, spans: dict[cst.CSTNode, _Span]) -> None:
        self._spans = spans
        self._ranges: dict[cst.CSTNode, CodeRange] = {}

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._ranges.get(node)
        if found is None:
            sl, sc, el, ec = self._spans[node]
            found = self._ranges[node] = CodeRange(CodePosition(sl, sc), CodePosition(el, ec))
        return found

    def __iter__(self) -> Iterator[cst.CSTNode]:
        return iter(self._spans)

    def __len__(self) -> int:
        return len(self._spans)

    def __contains__(self, node: object) -> bool:
        return node in self._spans


def positions(module: cst.Module) -> Positions:
    """The position of every node of `module`."""
    state = _State(default_indent=module.default_indent, default_newline=module.default_newline)
    module._codegen(state)
    return Positions(state.spans)


class _State(CodegenState):
    """PositionProvidingCodegenState's bookkeeping, with spans kept as plain tuples."""

    def __init__(self, default_indent: str, default_newline: str) -> None:
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.line = 1  # 1-based
        self.column = 0  # 0-based
        self.spans: dict[cst.CSTNode, _Span] = {}
        self._starts: list[tuple[int, int]] = []

    def _advance(self, value: str) -> None:
        if "\n" in value or "\r" in value:
            segments = value.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            self.line += len(segments) - 1
            self.column = len(segments[-1])
        else:
            self.column += len(value)

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self._advance(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self._advance(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._starts.append((self.line, self.column))

    def after_codegen(self, node: cst.CSTNode) -> None:
        line, column = self._starts.pop()
        if node not in self.spans:  # a syntactic extent recorded inside wins
            self.spans[node] = (line, column, self.line, self.column)

    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> "_Extent":
        return _Extent(self, node, start_node, end_node)


class _Extent:
    """`with state.record_syntactic_position(node, ...)`: the node's span is what the
    block generates, or starts/ends where `start_node`/`end_node` do."""

    __slots__ = ("_state", "_node", "_start_node", "_end_node", "_line", "_column")

    def __init__(self, state: _State, node, start_node, end_node) -> None:
        self._state, self._node, self._start_node, self._end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self._line, self._column = self._state.line, self._state.column

    def __exit__(self, *exc: object) -> None:
        state = self._state
        sl, sc, el, ec = self._line, self._column, state.line, state.column
        if self._start_node is not None:
            sl, sc = state.spans[self._start_node][:2]
        if self._end_node is not None:
            el, ec = state.spans[self._end_node][2:]
        state.spans[self._node] = (sl, sc, el, ec)
