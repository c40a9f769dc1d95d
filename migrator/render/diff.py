"""Unified diffs of one file's migration, as `git apply` and `patch -p1` read them."""

from __future__ import annotations

import difflib

from migrator.findings import FileResult
from migrator.notebook import is_notebook
from migrator.render.notebook_diff import notebook_diff

_NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(result: FileResult, context: int = 3) -> str:
    """The diff from `result.before` to `result.after`; "" when nothing changed."""
    if result.before is None or result.after is None or result.before == result.after:
        return ""
    if is_notebook(result.path):
        cells = notebook_diff(result, context)
        if cells is not None:
            return cells
    name = result.path.replace("\\", "/").lstrip("/")
    lines = difflib.unified_diff(
        _lines(result.before), _lines(result.after), f"a/{name}", f"b/{name}", n=context
    )
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:  # the last line of a file without a final newline
            out.append(line + "\n" + _NO_NEWLINE)
    return "".join(out)


def _lines(text: str) -> list[str]:
    """Split after each "\\n" only: str.splitlines would also split at form feeds and
    Unicode separators, which are ordinary characters inside a Python line."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def line_style(line: str) -> str | None:
    """The rich style of one diff line (None: plain)."""
    if line.startswith(("+++", "---")):
        return "bold"
    if line.startswith("@@"):
        return "cyan"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    return None
