"""A content-addressed cache of per-file results, so a run over an unchanged tree is cheap.

The key is a hash of everything a result depends on: the file's path and bytes, the tool
(version, Python, LibCST, the source of migrator/ and rules/) and the settings that change
results (rules selected, target, fix and unsafe-fix settings). A changed input gives a new
key, so a stale entry is never read. Entries are small JSON files written atomically; a
missing, corrupt or foreign entry is a miss. Never used for files that failed. Nothing
here migrates, prints, or fails a run: a cache that cannot be written is no cache.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import sys
import tempfile
from importlib import util

from migrator.config import Config, find_pyproject
from migrator.findings import FileResult, FileStatus, Finding, Position, Severity

DIRNAME = ".accel-migrate-cache"
SCHEMA = 1
_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by accel-migrate.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
# Config fields that never change a file's result (they choose files, or were already
# folded into `ignore` by Config.for_file). Any other field, present or future, is keyed.
_NOT_KEYED = frozenset({"per_file_ignores", "exclude", "root"})


def default_directory(cwd: str | None = None) -> str:
    """`.accel-migrate-cache` beside the project's pyproject.toml (the nearest one with a
    `[tool.accel-migrate]` table above the working directory), else in the working directory."""
    cwd = cwd or os.getcwd()
    pyproject = find_pyproject(cwd)
    root = os.path.dirname(pyproject) if pyproject else cwd
    return os.path.join(root, DIRNAME)


class Cache:
    """Per-file entries under `directory/<tool>/<ab>/<key>.json`."""

    def __init__(self, directory: str, tool: str | None = None) -> None:
        self.directory = directory
        self.tool = tool or _this_tool()
        self._entries = os.path.join(directory, self.tool[:16])
        self._ready = False
        self.hits = self.misses = 0

    def key(self, path: str, data: bytes, config: Config) -> str:
        """The entry name for `path` holding `data`, migrated with `config`."""
        digest = hashlib.sha256()
        for part in (str(SCHEMA), self.tool, config_fingerprint(config), path):
            digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(data)
        return digest.hexdigest()

    def get(self, key: str, path: str, data: bytes) -> FileResult | None:
        """The cached result for `key` (`path` holding `data`), or None."""
        try:
            with open(self.entry_path(key), "rb") as fh:
                entry = json.loads(fh.read())
            if entry.get("schema") != SCHEMA or entry.get("key") != key:
                raise ValueError("not this entry")
            result = _decode(entry["result"], path, data)
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, LookupError):
            self.misses += 1  # missing, corrupt, or from another schema: recompute and replace
            return None
        self.hits += 1
        return result

    def has(self, key: str) -> bool:
        """Whether an entry exists under `key` (not whether it is readable)."""
        return os.path.exists(self.entry_path(key))

    def put(self, key: str, data: bytes, result: FileResult) -> None:
        """Store `result` (computed from `data`) under `key`; failures are not cached."""
        if result.status not in (FileStatus.UNCHANGED, FileStatus.CHANGED) or result.before is None:
            return
        try:
            text = json.dumps({"schema": SCHEMA, "key": key, "result": _encode(result, data)}, separators=(",", ":"))
            self._prepare()
            self._write(self.entry_path(key), text.encode("ascii"))
        except (OSError, ValueError, LookupError):
            pass  # read-only checkout, full disk: run without the cache

    def entry_path(self, key: str) -> str:
        """Where the entry for `key` lives (it may not exist)."""
        return os.path.join(self._entries, key[:2], key[2:] + ".json")

    def _prepare(self) -> None:
        """Create the directory with CACHEDIR.TAG (backup tools skip it) and a `.gitignore`
        of `*` (git never shows it), as Ruff's and pytest's caches do."""
        if self._ready:
            return
        os.makedirs(self.directory, exist_ok=True)
        for name, content in (("CACHEDIR.TAG", _TAG), (".gitignore", "# Created by accel-migrate automatically.\n*\n")):
            target = os.path.join(self.directory, name)
            if not os.path.exists(target):
                self._write(target, content.encode())
        self._ready = True

    @staticmethod
    def _write(target: str, data: bytes) -> None:
        """Temp file + os.replace: a concurrent reader sees the old entry or the new one."""
        directory = os.path.dirname(target)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def config_fingerprint(config: Config) -> str:
    """The settings that can change a file's result, as text."""
    return repr(sorted(
        (f.name, getattr(config, f.name)) for f in dataclasses.fields(config) if f.name not in _NOT_KEYED
    ))


@functools.lru_cache(maxsize=1)
def _this_tool() -> str:
    """Computed once per process: the code this process runs is what it loaded, even if
    the files change while it runs."""
    return tool_fingerprint()


def tool_fingerprint(packages: tuple[str, ...] = ("migrator", "rules")) -> str:
    """A hash of what computes results: versions, and every source file of `packages`
    (so editing a rule in a development checkout invalidates the cache)."""
    from migrator import __version__

    digest = hashlib.sha256(f"{SCHEMA}\0{__version__}\0{sys.version}\0{_libcst_version()}\0".encode())
    for package in packages:
        spec = util.find_spec(package)
        for base in (spec.submodule_search_locations or []) if spec else []:
            for name in sorted(_sources(base)):
                digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
                with open(os.path.join(base, name), "rb") as fh:
                    digest.update(hashlib.sha256(fh.read()).digest())
    return digest.hexdigest()


def _sources(base: str) -> list[str]:
    out = []
    for root, dirs, names in os.walk(base):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        out += [os.path.relpath(os.path.join(root, n), base) for n in names if n.endswith(".py")]
    return out


def _libcst_version() -> str:
    """LibCST's version file (its parser decides what `before` and `after` are), read
    without importing LibCST or importlib.metadata (both slow to import)."""
    spec = util.find_spec("libcst")
    if spec is None or spec.origin is None:
        return "?"
    try:
        with open(os.path.join(os.path.dirname(spec.origin), "_version.py"), "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return spec.origin


# -- FileResult <-> JSON -------------------------------------------------------------------
# `before` is usually the file's bytes decoded, and `after` usually equals `before`: those
# are stored as null and rebuilt from the bytes, checked at store time, so entries stay small.


def _encode(result: FileResult, data: bytes) -> dict:
    before = None if _decoded(data, result.encoding) == result.before else result.before
    after = None if result.after == result.before else result.after
    return {
        "status": result.status.value,
        "encoding": result.encoding,
        "before": before,
        "after": after,
        "findings": [_finding(f) for f in result.findings],
        "touched": sorted(result.touched_lines),
    }


def _decode(entry: dict, path: str, data: bytes) -> FileResult:
    before = entry["before"] if entry["before"] is not None else _decoded(data, entry["encoding"])
    if not isinstance(before, str):
        raise ValueError("bytes do not decode as stored")
    after = entry["after"] if entry["after"] is not None else before
    findings = tuple(_unfinding(f) for f in entry["findings"])
    return FileResult(
        path, FileStatus(entry["status"]), before, str(after), findings,
        encoding=str(entry["encoding"]), touched_lines=frozenset(int(n) for n in entry["touched"]),
    )


def _decoded(data: bytes, encoding: str) -> str | None:
    try:
        return data.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        return None


def _finding(f: Finding) -> list:
    return [f.path, f.start.line, f.start.col, f.end.line, f.end.col, f.code, f.name, f.message,
            f.fixable, f.fixed, f.unsafe_fix, f.severity.value, f.cell]


def _unfinding(row: list) -> Finding:
    path, line, col, end_line, end_col, code, name, message, fixable, fixed, unsafe, severity, cell = row
    return Finding(str(path), Position(int(line), int(col)), Position(int(end_line), int(end_col)), str(code),
                   str(name), str(message), bool(fixable), bool(fixed), bool(unsafe), Severity(severity),
                   None if cell is None else int(cell))
