"""The entry points: one source text in, one FileResult out. Never raises for user input."""

from __future__ import annotations

import os
from typing import Iterable, Iterator

import libcst as cst

from migrator import engine, registry
from migrator.config import Config
from migrator.findings import FileResult, FileStatus, Finding, Position, Severity

_RELEVANT = ("torch", "accelerat")


def _error(path: str, line: int, col: int, code: str, message: str) -> Finding:
    return Finding(path, Position(line, col), Position(line, col), code, code.lower(), message, severity=Severity.ERROR)


def _byte_place(source: str | bytes, offset: int) -> tuple[int, int]:
    """1-based line and column of a byte offset (for undecodable input)."""
    data = source if isinstance(source, bytes) else source.encode()
    head = data[:offset]
    return head.count(b"\n") + 1, offset - (head.rfind(b"\n") + 1) + 1


def _syntax_error_place(source: str | bytes, path: str, exc: cst.ParserSyntaxError) -> tuple[int, int, str]:
    """Prefer Python's own report (the place and words users know from tracebacks);
    fall back to LibCST's when this Python accepts what LibCST rejects."""
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as err:
        if err.lineno:
            return err.lineno, err.offset or 1, err.msg
    except ValueError:
        pass
    return exc.editor_line, exc.editor_column, exc.message


def migrate_source(source: str | bytes, path: str = "<stdin>", config: Config | None = None) -> FileResult:
    """Migrate one file's contents. Bytes are decoded as Python does (PEP 263 cookie, BOM)."""
    config = config or Config()
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        line, col, reason = _syntax_error_place(source, path, exc)
        return FileResult(path, FileStatus.FAILED, error=_error(path, line, col, "E001", f"cannot parse: {reason}"))
    except UnicodeDecodeError as exc:
        line, col = _byte_place(source, exc.start)
        reason = f"cannot decode byte 0x{exc.object[exc.start]:02x} as {exc.encoding}"
        return FileResult(path, FileStatus.FAILED, error=_error(path, line, col, "E002", reason))
    except (LookupError, SyntaxError) as exc:
        return FileResult(path, FileStatus.FAILED, error=_error(path, 1, 1, "E002", f"cannot decode: {exc}"))
    before = module.code
    if not any(word in before for word in _RELEVANT):
        return FileResult(path, FileStatus.UNCHANGED, before, before, encoding=module.encoding)
    try:
        outcome = engine.migrate_module(module, path, config, registry.select(config))
        after = outcome.module.code
        if after != before:
            engine.verify(after, path)
    except Exception as exc:  # an internal bug: report it for this file, keep going
        message = f"internal error ({type(exc).__name__}: {exc}); please report this bug"
        return FileResult(path, FileStatus.FAILED, before, error=_error(path, 1, 1, "E999", message))
    status = FileStatus.CHANGED if after != before else FileStatus.UNCHANGED
    return FileResult(
        path, status, before, after, outcome.findings, encoding=module.encoding, touched_lines=outcome.touched_lines
    )


def python_files(paths: Iterable[str]) -> Iterator[str]:
    """Expand directories recursively into their *.py files (sorted), keep files as given."""
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
                for name in sorted(files):
                    if name.endswith(".py"):
                        yield os.path.join(root, name)
        else:
            yield path


def migrate_paths(paths: Iterable[str], config: Config | None = None) -> Iterator[FileResult]:
    """Migrate every Python file under `paths`; unreadable files become FAILED results."""
    for path in python_files(paths):
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            yield FileResult(path, FileStatus.FAILED, error=_error(path, 1, 1, "E003", f"cannot read: {exc.strerror or exc}"))
            continue
        yield migrate_source(data, path, config)
