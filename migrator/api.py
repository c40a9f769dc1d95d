"""The entry points: one source text in, one FileResult out. Never raises for user input."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from typing import Iterable, Iterator

import libcst as cst

from migrator import engine, files, notebook, registry
from migrator.config import Config, ConfigError, ConfigResolver, Overrides
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
        outcome = engine.migrate_module(module, path, config, registry.select(config), source=before)
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


def unknown_selectors(selectors: Iterable[str]) -> list[str]:
    """The selectors (codes, prefixes, names) that match no rule: a typo selects nothing."""
    rules = registry.all_rules()
    return [s for s in selectors if not any(registry.matches(rule, [s]) for rule in rules)]


def migrate_paths(
    paths: Iterable[str],
    config: Config | None = None,
    *,
    overrides: Overrides | None = None,
    isolated: bool = False,
    write: bool = False,
    output: str | None = None,
) -> Iterator[FileResult]:
    """Migrate every Python file under `paths` (directories walked recursively).

    With `config`, every file uses it as given. Without, each file uses the nearest
    `[tool.accel-migrate]` (none when `isolated`) with `overrides` on top. `write`
    replaces changed files in place; `output` writes the (single) result there instead.
    Problems with a file or its configuration become FAILED results; the walk goes on.
    """
    resolver = _FixedConfig(config) if config is not None else ConfigResolver(overrides, isolated=isolated)
    reported: set[str] = set()
    for path in files.python_files(paths, resolver.excluded):
        try:
            file_config = _checked(resolver.config_for(path))
        except ConfigError as exc:
            if exc.path in reported:  # said once; the files under it are skipped
                yield FileResult(path, FileStatus.SKIPPED)
                continue
            reported.add(exc.path)
            reason = f"invalid configuration: {exc.reason}"
            yield FileResult(path, FileStatus.FAILED, error=_error(_shown(exc.path), exc.line, exc.col, "E007", reason))
            continue
        yield _migrate_file(path, file_config.for_file(path), write=write, output=output)


def _migrate_file(path: str, config: Config, *, write: bool, output: str | None) -> FileResult:
    try:
        source = files.read_source(path)
    except files.InputError as exc:
        return FileResult(path, FileStatus.FAILED, error=_error(path, exc.line, exc.col, exc.code, exc.reason))
    migrate = notebook.migrate_notebook if notebook.is_notebook(path) else migrate_source
    result = migrate(source.data, path, config)
    if result.after is None or not (output or (write and result.changed)):
        return result
    try:
        data = result.after.encode(result.encoding)
        if output:
            files.write_new(output, data, mode=_mode(path))
        else:
            files.write_back(source, data)
    except UnicodeEncodeError as exc:
        reason = f"cannot write: the migrated code cannot be encoded as {result.encoding} ({exc.reason})"
        return replace(result, status=FileStatus.FAILED, error=_error(path, 1, 1, "E005", reason))
    except files.InputError as exc:
        return replace(result, status=FileStatus.FAILED, error=_error(exc.path, exc.line, exc.col, exc.code, exc.reason))
    return result


def _shown(path: str) -> str:
    """A discovered pyproject.toml's absolute path, made relative when under the cwd."""
    rel = os.path.relpath(path)
    return path if rel.startswith(os.pardir) else rel


def _mode(path: str) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


def _checked(config: Config) -> Config:
    """Refuse a project config whose selectors match no rule (E007 names the file)."""
    for key, selectors in (("select", config.select), ("ignore", config.ignore)):
        bad = unknown_selectors(s for s in selectors if s.upper() != "ALL")
        if bad and config.root is not None:
            pyproject = os.path.join(config.root, "pyproject.toml")
            raise ConfigError(pyproject, f"{key}: {bad[0]!r} matches no rule")
    return config


class _FixedConfig:
    """The resolver for an explicit Config: the same settings for every file."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def config_for(self, path: str) -> Config:
        return self.config

    def excluded(self, path: str) -> bool:
        return self.config.excludes(path)
