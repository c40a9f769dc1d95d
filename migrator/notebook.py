"""A Jupyter notebook as one Python program, and back.

The code cells are joined into one program (so a name defined in one cell is known in the
next), IPython magics and shell lines are masked to placeholders that parse, and after the
migration only the changed cells' `source` is written back into the file's own JSON text,
so markdown, outputs, metadata, ids and formatting stay byte for byte. Nothing here
decides what to migrate: `migrate_notebook` runs the ordinary engine on the program.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Iterator

from migrator.config import Config
from migrator.findings import FileResult, FileStatus, Finding, Position, Severity
from migrator.magics import is_python_cell, mask_lines, split_lines

NOTEBOOK_SUFFIX = ".ipynb"

_BOM = "\ufeff"
_IMPORT = re.compile(r"(import|from)\s")


def is_notebook(path: str) -> bool:
    """Whether `path` names a notebook (the engine's only clue that it runs on one)."""
    return path.lower().endswith(NOTEBOOK_SUFFIX)


class NotebookError(ValueError):
    """The file is not a notebook this tool can read; the place is in the JSON text."""

    def __init__(self, reason: str, line: int = 1, col: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.col = col


@dataclass(frozen=True, order=True)
class CellLine:
    """A line of a notebook: `cell` is the 1-based position among all cells (markdown
    included, as editors count them and as Ruff prints them), `line` 1-based in the cell."""

    cell: int
    line: int


@dataclass
class _CodeCell:
    index: int  # 0-based position in the notebook's "cells"
    text: str  # the source, "\r\n" normalised to "\n"
    as_list: bool  # stored as a list of lines (nbformat's way) rather than one string
    crlf: bool
    python: bool = True  # False for %%bash, %%writefile, ...: left out of the program

    @property
    def number(self) -> int:
        return self.index + 1


# -- JSON: read, find each code cell's "source" value, write back only what changed ---------


class Notebook:
    """A parsed notebook plus where each code cell's `source` value sits in the text."""

    def __init__(self, text: str, encoding: str, data: dict, spans: dict[int, tuple[int, int]]) -> None:
        self.text = text
        self.encoding = encoding
        self.data = data
        self._spans = spans
        self.cells = [_code_cell(i, cell) for i, cell in enumerate(data["cells"]) if _is_code(cell)]

    @classmethod
    def parse(cls, source: str | bytes) -> Notebook:
        """Decode (UTF-8, a BOM kept for writing back) and parse; NotebookError otherwise."""
        encoding = "utf-8"
        if isinstance(source, bytes):
            try:
                text = source.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise NotebookError(f"cannot decode byte 0x{source[exc.start]:02x} as utf-8") from None
        else:
            text = source
        if text.startswith(_BOM):
            text, encoding = text[1:], "utf-8-sig"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise NotebookError(f"not a Jupyter notebook: invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
        _check_shape(data)
        return cls(text, encoding, data, _source_spans(text))

    @property
    def language(self) -> str:
        """The kernel's language ("python" when the metadata does not say)."""
        meta = self.data.get("metadata") or {}
        info = meta.get("language_info") or {}
        kernel = meta.get("kernelspec") or {}
        return str(info.get("name") or kernel.get("language") or "python").lower()

    def with_sources(self, sources: dict[int, str]) -> str:
        """The file's text with the `source` of the cells in `sources` (by index) replaced."""
        text = self.text
        style = _Style.of(text)
        by_index = {cell.index: cell for cell in self.cells}
        for index in sorted(sources, reverse=True):
            start, end = self._spans[index]
            cell = by_index[index]
            new = sources[index].replace("\n", "\r\n") if cell.crlf else sources[index]
            value: str | list[str] = split_lines(new) if cell.as_list else new
            text = text[:start] + style.dump(value, text, start, end) + text[end:]
        return text


def _is_code(cell: object) -> bool:
    return isinstance(cell, dict) and cell.get("cell_type") == "code"


def _code_cell(index: int, cell: dict) -> _CodeCell:
    source = cell.get("source", "")
    raw = "".join(source) if isinstance(source, list) else str(source)
    text = raw.replace("\r\n", "\n")
    return _CodeCell(index, text, isinstance(source, list), text != raw, is_python_cell(text))


def _check_shape(data: object) -> None:
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        if isinstance(data, dict) and "worksheets" in data:
            raise NotebookError("nbformat 3 notebooks are not supported (upgrade: jupyter nbconvert --to notebook)")
        raise NotebookError("not a Jupyter notebook: no list of cells")
    for cell in data["cells"]:
        if not isinstance(cell, dict):
            raise NotebookError("not a Jupyter notebook: a cell is not an object")
        source = cell.get("source", "")
        if not isinstance(source, str) and not (isinstance(source, list) and all(isinstance(s, str) for s in source)):
            raise NotebookError(f"not a Jupyter notebook: cell {data['cells'].index(cell) + 1} has a malformed source")


_WS = " \t\n\r"


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _members(text: str, i: int) -> Iterator[tuple[str, int, int]]:
    """(key, value start, value end) of the JSON object starting at `text[i] == "{"`."""
    decoder = json.JSONDecoder()
    i = _skip_ws(text, i + 1)
    while text[i] != "}":
        key, i = json.decoder.scanstring(text, i + 1)
        i = _skip_ws(text, _skip_ws(text, i) + 1)  # past ":"
        end = decoder.raw_decode(text, i)[1]
        yield key, i, end
        i = _skip_ws(text, end)
        if text[i] == ",":
            i = _skip_ws(text, i + 1)


def _source_spans(text: str) -> dict[int, tuple[int, int]]:
    """Where each cell's `source` value is in the text (the JSON is already known valid)."""
    spans: dict[int, tuple[int, int]] = {}
    for key, start, _ in _members(text, _skip_ws(text, 0)):
        if key != "cells":
            continue
        spans.clear()  # a repeated key: the last one wins, as in json.loads
        decoder = json.JSONDecoder()
        i, index = _skip_ws(text, start + 1), 0
        while text[i] != "]":
            end = decoder.raw_decode(text, i)[1]
            for cell_key, value_start, value_end in _members(text, i):
                if cell_key == "source":
                    spans[index] = (value_start, value_end)
            i, index = _skip_ws(text, end), index + 1
            if text[i] == ",":
                i = _skip_ws(text, i + 1)
    return spans


@dataclass(frozen=True)
class _Style:
    """How the file writes JSON, so a rewritten value looks like its neighbours."""

    unit: str  # one level of indentation; "" for a single-line file
    newline: str
    ensure_ascii: bool
    item_sep: str

    @classmethod
    def of(cls, text: str) -> _Style:
        newline = "\r\n" if "\r\n" in text else "\n"
        second = text.split("\n", 2)[1] if text.count("\n") >= 2 else ""
        unit = second[: len(second) - len(second.lstrip(" \t"))]
        ascii_only = text.isascii() and re.search(r"\\u(?!00[0-7])[0-9a-fA-F]{4}", text) is not None
        item_sep = ", " if unit == "" and ", " in text else ","
        return cls(unit or ("" if text.count("\n") <= 1 else " "), newline, ascii_only, item_sep)

    def dump(self, value: str | list[str], text: str, start: int, end: int) -> str:
        """`value` as JSON, laid out like the value it replaces at `text[start:end]`."""
        if isinstance(value, str):
            return json.dumps(value, ensure_ascii=self.ensure_ascii)
        items = [json.dumps(line, ensure_ascii=self.ensure_ascii) for line in value]
        if not items:
            return "[]"
        if not self.unit:  # a file on one line
            return "[" + self.item_sep.join(items) + "]"
        old = text[start:end]
        line_start = text.rfind("\n", 0, start) + 1
        key_line = text[line_start:start]
        outer = key_line[: len(key_line) - len(key_line.lstrip(" \t"))]
        inner = outer + self.unit
        if "\n" in old:  # take the indentation the old list used
            first = old.split("\n", 1)[1]
            inner = first[: len(first) - len(first.lstrip(" \t"))] or inner
            last = old.rsplit("\n", 1)[1]
            outer = last[: len(last) - len(last.lstrip(" \t"))]
        nl = self.newline
        return "[" + nl + ("," + nl).join(inner + item for item in items) + nl + outer + "]"


# -- The program: code cells joined, magics and shell lines masked --------------------------


class ProgramMapError(RuntimeError):
    """The migrated program lost or reordered a placeholder: a bug, never the user's fault."""


@dataclass(frozen=True)
class _Entry:
    """One line of the program being built."""

    kind: str  # "py", "magic" or "cell" (the boundary before a code cell)
    text: str  # the Python line, or the indentation of a placeholder
    at: CellLine
    ref: int = 0  # magic number, or position of the cell among the program's cells
    statement_start: bool = False


class Program:
    """The code cells as one Python program, with the map from its lines to cell lines.

    A cell boundary is a placeholder line before every code cell but the first; a magic or
    shell line (with its backslash continuations) becomes one placeholder line with the
    same indentation. Placeholders are plain names, so they parse anywhere a statement
    can stand, and no rule touches them. Those in the leading run of imports are written
    as `import <placeholder>` so that imports the migration adds land after the notebook's
    own imports (LibCST adds them after the leading import block), not above `!pip install`.
    """

    def __init__(self, notebook: Notebook) -> None:
        self.cells = [cell for cell in notebook.cells if cell.python]
        self.prefix = _unused_prefix("".join(cell.text for cell in notebook.cells))
        self.magics: list[tuple[str, ...]] = []
        entries: list[_Entry] = []
        for position, cell in enumerate(self.cells):
            if position:
                entries.append(_Entry("cell", "", CellLine(cell.number, 1), position))
            for kind, payload, line, start in mask_lines(cell.text):
                at = CellLine(cell.number, line)
                if kind == "magic":
                    self.magics.append(payload)
                    indent = payload[0][: len(payload[0]) - len(payload[0].lstrip(" \t"))]
                    entries.append(_Entry("magic", indent, at, len(self.magics) - 1))
                else:
                    entries.append(_Entry("py", payload[0], at, statement_start=start))
        imports_end = _leading_imports_end(entries)
        self.text = "".join(self._line(i < imports_end, e) for i, e in enumerate(entries))
        self.where = [e.at for e in entries]  # program line n (1-based) is where[n - 1]
        self._pattern = re.compile(rf"[ \t]*(?:import )?{re.escape(self.prefix)}(magic|cell)_(\d+)__[ \t]*\n?")

    def _line(self, in_imports: bool, entry: _Entry) -> str:
        if entry.kind == "py":
            return entry.text
        name = f"{self.prefix}{entry.kind}_{entry.ref}__"
        if in_imports and not entry.text:
            return f"import {name}\n"
        return f"{entry.text}{name}\n"

    def split(self, code: str) -> tuple[dict[int, str], list[CellLine]]:
        """The new text of each changed cell (by notebook index) from a migrated program,
        and where each line of `code` now is in the notebook."""
        lines: list[list[str]] = [[] for _ in self.cells]
        origin: list[tuple[int, int]] = []
        position, seen = 0, set()
        for line in split_lines(code):
            line = line if line.endswith("\n") else line + "\n"
            match = self._pattern.fullmatch(line)
            if match and match[1] == "cell":
                if int(match[2]) != position + 1:
                    raise ProgramMapError(f"cell boundary {match[2]} out of order")
                position = int(match[2])
                origin.append((position, 0))
                continue
            origin.append((position, len(lines[position])))
            if match:
                number = int(match[2])
                if number in seen or number >= len(self.magics):
                    raise ProgramMapError(f"magic placeholder {number} repeated")
                seen.add(number)
                lines[position].extend(self.magics[number])
            else:
                lines[position].append(line)
        if position != len(self.cells) - 1 or len(seen) != len(self.magics):
            raise ProgramMapError("a cell boundary or magic placeholder went missing")
        sources: dict[int, str] = {}
        dropped = []
        for cell, new in zip(self.cells, lines):
            text, lead = _rejoin(cell.text, new)
            dropped.append(lead)
            if text != cell.text:
                sources[cell.index] = text
        where = [CellLine(self.cells[p].number, max(index - dropped[p], 0) + 1) for p, index in origin]
        return sources, where


def _unused_prefix(text: str) -> str:
    prefix, n = "__accel_migrate_", 0
    while prefix in text:
        n += 1
        prefix = f"__accel_migrate{n}_"
    return prefix


def _leading_imports_end(entries: list[_Entry]) -> int:
    """Index just past the last import of the program's leading imports (magics, cell
    boundaries, blank and comment lines may sit between them)."""
    end = 0
    for i, entry in enumerate(entries):
        if entry.kind != "py" or not entry.statement_start:
            continue
        stripped = entry.text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if entry.text[0] in " \t" or not _IMPORT.match(entry.text):
            break
        end = i
    return end


def _rejoin(old: str, new: list[str]) -> tuple[str, int]:
    """A cell's new text: blank lines the migration added at its top or bottom dropped
    (they belong between cells, not in them), its final-newline habit kept. Also returns
    how many lines were dropped from the top."""
    before = split_lines(old)
    if all(not line.strip() for line in new):
        kept = new[: len(before)]
        lead = len(new) - len(kept)
    else:
        lead = max(_blank_run(new) - _blank_run(before), 0)
        trail = max(_blank_run(new[::-1]) - _blank_run(before[::-1]), 0)
        kept = new[lead: len(new) - trail]
    text = "".join(kept)
    if not old.endswith("\n") and text.endswith("\n"):
        text = text[:-1]
    return text, lead


def _blank_run(lines: list[str]) -> int:
    count = 0
    for line in lines:
        if line.strip():
            break
        count += 1
    return count


# -- Migrating: the engine on the program, findings mapped to cells -------------------------


def migrate_notebook(source: str | bytes, path: str = "<stdin>.ipynb", config: Config | None = None) -> FileResult:
    """Migrate a notebook's code cells as one program; `before`/`after` are the file's JSON
    text. Findings carry the cell (1-based among all cells) and the line in it. Never
    raises for user input: an unreadable notebook is a FAILED result (E008)."""
    from migrator.api import migrate_source  # api sends .ipynb files here

    config = config or Config()
    try:
        notebook = Notebook.parse(source)
    except NotebookError as exc:
        return FileResult(path, FileStatus.FAILED, error=_error(path, exc.line, exc.col, "E008", exc.reason))
    text = notebook.text
    if notebook.language != "python":
        return FileResult(path, FileStatus.UNCHANGED, text, text, encoding=notebook.encoding)
    program = Program(notebook)
    # The engine tells rules they run on a notebook by the path's suffix.
    result = migrate_source(program.text, path if is_notebook(path) else path + NOTEBOOK_SUFFIX, config)
    if result.status is FileStatus.FAILED:
        error = _in_cells(result.error, path, program.where) if result.error else None
        return FileResult(path, FileStatus.FAILED, text, error=error, encoding=notebook.encoding)
    after, where = text, program.where
    if result.after is not None and result.after != program.text:
        try:
            sources, where = program.split(result.after)
            after = notebook.with_sources(sources) if sources else text
            _check_written(notebook, after, sources)
        except (ProgramMapError, ValueError) as exc:
            message = f"internal error (cannot map the migration back to cells: {exc}); please report this bug"
            return FileResult(path, FileStatus.FAILED, text, error=_error(path, 1, 1, "E999", message))
    findings = tuple(_in_cells(f, path, program.where if f.fixed else where) for f in result.findings)
    status = FileStatus.CHANGED if after != text else FileStatus.UNCHANGED
    return FileResult(path, status, text, after, findings, encoding=notebook.encoding)


def _check_written(notebook: Notebook, after: str, sources: dict[int, str]) -> None:
    """The rewritten JSON must be the old notebook with exactly the new sources."""
    expected = json.loads(notebook.text)
    for cell in notebook.cells:
        if cell.index in sources:
            new = sources[cell.index].replace("\n", "\r\n") if cell.crlf else sources[cell.index]
            expected["cells"][cell.index]["source"] = split_lines(new) if cell.as_list else new
    if json.loads(after) != expected:
        raise ProgramMapError("the rewritten JSON does not hold the new sources")


def _in_cells(finding: Finding, path: str, where: list[CellLine]) -> Finding:
    """`finding` with its program lines turned into a cell and a line in that cell."""
    def at(line: int) -> CellLine:
        return where[min(max(line, 1), len(where)) - 1] if where else CellLine(1, 1)

    start, end = at(finding.start.line), at(finding.end.line)
    end_pos = Position(end.line, finding.end.col) if end.cell == start.cell else Position(start.line, finding.start.col)
    return replace(finding, path=path, cell=start.cell, start=Position(start.line, finding.start.col), end=end_pos)


def _error(path: str, line: int, col: int, code: str, message: str) -> Finding:
    at = Position(line, col)
    return Finding(path, at, at, code, code.lower(), message, severity=Severity.ERROR)
