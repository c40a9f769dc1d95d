"""The diff of a notebook's migration, cell by cell (`--- a/nb.ipynb:cell 3`), not its JSON.

Cells are numbered 1-based among all cells, as findings print them. Nothing here reads
or writes files; the JSON texts come from the FileResult.
"""

from __future__ import annotations

import json

from migrator.findings import FileResult, FileStatus


def notebook_diff(result: FileResult, context: int = 3) -> str | None:
    """Unified diffs of the cells whose source changed; None when `before`/`after` are
    not notebook JSON (the caller then diffs the text)."""
    from migrator.render.diff import unified_diff

    old_cells, new_cells = _sources(result.before), _sources(result.after)
    if old_cells is None or new_cells is None:
        return None
    out = []
    for index in range(max(len(old_cells), len(new_cells))):
        old = old_cells[index] if index < len(old_cells) else ""
        new = new_cells[index] if index < len(new_cells) else ""
        if old == new:
            continue
        if not old.endswith("\n") and not new.endswith("\n"):
            # Cells rarely end with a newline; saying so in every hunk would be noise.
            old, new = old + "\n" if old else old, new + "\n" if new else new
        cell = FileResult(f"{result.path}:cell {index + 1}", FileStatus.CHANGED, old, new)
        out.append(unified_diff(cell, context))
    return "".join(out)


def _sources(text: str | None) -> list[str] | None:
    """Every cell's source as one string (markdown too, so the numbering matches)."""
    if text is None:
        return None
    try:
        cells = json.loads(text)["cells"]
        return [_joined(cell.get("source", "")) for cell in cells]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _joined(source: object) -> str:
    return "".join(source) if isinstance(source, list) else str(source)
