"""Own-line comments of removed statements move onto the code that follows.

LibCST keeps a comment on its own line in the `leading_lines` of the statement below it, so
removing that statement would drop the comment too, although it usually describes the lines
after it (`# the training step` above a `.cuda()` move). Every transformer that removes
statements (the edit applier, the unused-import pass) carries them with this helper.
"""

from __future__ import annotations

import libcst as cst


class CarriedComments:
    """Per open block, the comment lines of statements removed so far, waiting for a home.

    Call `enter` from the transformer's `on_visit` and `leave` from its `on_leave`, after the
    node's own result is known.
    """

    def __init__(self) -> None:
        self._orphaned: list[list[cst.EmptyLine]] = []

    def enter(self, node: cst.CSTNode) -> None:
        if isinstance(node, (cst.IndentedBlock, cst.Module)):
            self._orphaned.append([])

    def leave(self, original: cst.CSTNode, result):
        """`result` with any waiting comments attached: to the next kept statement of the
        block, or to the block's footer when nothing follows."""
        if isinstance(original, cst.BaseStatement) and self._orphaned:
            result = self._carry(original, result)
        if isinstance(original, (cst.IndentedBlock, cst.Module)):
            left = self._orphaned.pop()
            if left and isinstance(result, (cst.IndentedBlock, cst.Module)):
                result = result.with_changes(footer=[*left, *result.footer])
        return result

    def _carry(self, original: cst.BaseStatement, result):
        pending = self._orphaned[-1]
        if isinstance(result, cst.RemovalSentinel):
            pending.extend(line for line in original.leading_lines if line.comment is not None)
            return result
        if not pending:
            return result
        nodes = list(result.nodes) if isinstance(result, cst.FlattenSentinel) else [result]
        first = nodes[0]
        if not hasattr(first, "leading_lines"):
            return result
        nodes[0] = first.with_changes(leading_lines=[*pending, *first.leading_lines])
        pending.clear()
        return cst.FlattenSentinel(nodes) if isinstance(result, cst.FlattenSentinel) else nodes[0]
