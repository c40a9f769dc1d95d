"""IPython's own syntax in a notebook cell: which lines are magics, shell escapes or help.

Only the lines; nothing here knows about notebooks' JSON or the migration. A line can be
IPython syntax only where a Python statement would start, so a small scanner follows
brackets, strings and backslash continuations (a docstring line starting with `!` is text).
"""

from __future__ import annotations

import re
from typing import Iterator

# `%%` cell magics whose body is Python run in the notebook's namespace: only their first
# line is masked. Any other cell magic (%%bash, %%writefile, ...) leaves the cell out.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})

_ASSIGNED_MAGIC = re.compile(r"[A-Za-z_][\w.,\s\[\]()]*=\s*[!%]")  # `files = !ls`, `t = %timeit -o f()`
_HELP = re.compile(r"[\w.\[\]()'\"]+\?{1,2}")  # `obj?`, `torch.optim.SGD??`


def is_python_cell(text: str) -> bool:
    """False for a cell run by another cell magic (%%bash, %%writefile, %%html, ...)."""
    first = text.lstrip().split("\n", 1)[0]
    return not first.startswith("%%") or first[2:].split(" ", 1)[0] in PYTHON_CELL_MAGICS


def mask_lines(text: str) -> Iterator[tuple[str, tuple[str, ...], int, bool]]:
    """("py", (line,), n, starts a statement) or ("magic", lines, n, True) for each line
    (or magic with its continuation lines) of a cell; n is the 1-based line in the cell.

    Only a line that starts a statement can be IPython syntax, so the scan follows open
    brackets, strings (a docstring line starting with `!` stays text) and backslashes.
    """
    lines = [line if line.endswith("\n") else line + "\n" for line in split_lines(text)]
    scanner = _Scanner()
    i = 0
    while i < len(lines):
        line = lines[i]
        at_start = scanner.at_statement_start
        if at_start and _is_ipython(line, first=not any(prev.strip() for prev in lines[:i])):
            end = i + 1
            while lines[end - 1].rstrip("\n").endswith("\\") and end < len(lines):
                end += 1
            yield "magic", tuple(lines[i:end]), i + 1, True
            i = end
            continue
        scanner.feed(line)
        yield "py", (line,), i + 1, at_start
        i += 1


def _is_ipython(line: str, first: bool) -> bool:
    """IPython's own syntax at the start of a statement: `%magic`, `%%cell magic` (first
    line only), `!shell`, `x = !shell`, `obj?`, `?obj`, and autocall (`/f x`)."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return False
    if stripped.startswith("%%"):
        return first
    if stripped[0] in "%!?/;,":
        return True
    if _ASSIGNED_MAGIC.match(stripped):
        return True
    code = stripped.split("#", 1)[0].rstrip()
    return code.endswith("?") and _HELP.fullmatch(code) is not None


class _Scanner:
    """Just enough of Python's tokenizer to know whether the next line starts a statement."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: str | None = None
        self.continued = False

    @property
    def at_statement_start(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def feed(self, line: str) -> None:
        i, n, comment = 0, len(line), False
        while i < n:
            c = line[i]
            if self.quote:
                if c == "\\":
                    i += 2
                    continue
                if line.startswith(self.quote, i):
                    i += len(self.quote)
                    self.quote = None
                    continue
            elif c == "#":
                comment = True
                break
            elif c in "([{":
                self.depth += 1
            elif c in ")]}":
                self.depth = max(self.depth - 1, 0)
            elif c in "'\"":
                self.quote = c * 3 if line.startswith(c * 3, i) else c
                i += len(self.quote)
                continue
            i += 1
        body = line.rstrip("\r\n")
        self.continued = not comment and body.endswith("\\") and self.quote is None
        if self.quote in ("'", '"') and not body.endswith("\\"):
            self.quote = None  # a one-quote string cannot span lines: Python reports it


def split_lines(text: str) -> list[str]:
    """Split after each "\\n" only (nbformat's list form: the last line may lack one)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines
