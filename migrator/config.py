"""Run settings: which rules, which target, which fixes, and where they come from.

`Config` is frozen and knows no rule by import. `[tool.accel-migrate]` in the nearest
pyproject.toml sets a project's defaults; command-line `Overrides` win over it.
"""

from __future__ import annotations

import enum
import fnmatch
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any

PYPROJECT = "pyproject.toml"
SECTION = "accel-migrate"


class Target(enum.Enum):
    """Which Accelerator the migrated code imports."""

    RUNTIME = "runtime"
    ACCELERATE = "accelerate"

    @property
    def module(self) -> str:
        """The module a migrated script imports `Accelerator` from."""
        return "runtime" if self is Target.RUNTIME else "accelerate"


@dataclass(frozen=True)
class Config:
    """Settings for one run. `select`/`ignore` hold codes, code prefixes or rule names.

    `per_file_ignores` and `exclude` hold globs relative to `root` (the directory of the
    pyproject.toml they came from; the current directory when None).
    """

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    target: Target = Target.RUNTIME
    fix: bool = True
    unsafe_fixes: bool = False
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = field(default_factory=tuple)
    exclude: tuple[str, ...] = ()
    root: str | None = None
    # Set by a run of several files (migrator/project/), never by users: the calls in
    # this file that pass the Accelerator to a function of another file of the run, and
    # this file's callers in other files, written as a stub the engine appends.
    project_calls: tuple[str, ...] = ()
    project_callers: str = ""
    project_stepped: tuple[str, ...] = ()  # schedulers those functions step per batch
    project_loaders: tuple[tuple[str, tuple[int, ...]], ...] = ()  # calls returning DataLoaders: positions (-1: the value)
    # attributes of own classes (or of classes of other files built on them) bound to a model a function of
    # the run returns wrapped in DataParallel: (attribute, where the wrap is) (project/hand_wrapped.py)
    project_hand_wrapped: tuple[tuple[str, str], ...] = ()
    # parameters of own functions a caller of another file hands an experiment writer, or a dict holding one:
    # (function, parameter, key or "", where the writer is made) (project/handed_loggers.py)
    project_handed_loggers: tuple[tuple[str, str, str, str], ...] = ()
    # calls of other files' functions reading an attribute of a parameter beyond torch.nn.Module's:
    # (spelling, position, parameter, attribute, where, it trains) (project/model_readers.py)
    project_model_readers: tuple[tuple[str, int, str, str, str, bool], ...] = ()
    project_wrapping_calls: tuple[str, ...] = ()  # calls of other files' functions returning a model wrapped in DataParallel (same)
    # attributes of own classes kept from a parameter every call of the run hands a main-process test
    # (`self.save_to_disk`, from `save_to_disk = dist_util.get_rank() == 0`) (project/main_flags.py)
    project_main_flags: tuple[str, ...] = ()
    project_module_readers: tuple[str, ...] = ()  # calls of other files' code reading `.module` of a model handed to it (project/module_readers.py)
    project_sharded_params: tuple[str, ...] = ()  # own parameters callers hand a loader a builder of the run shards (project/sharded_loaders.py)
    project_sharded_loaders: tuple[str, ...] = ()  # calls of other files' functions returning loaders a DistributedSampler shards (project/sharded_loaders.py)
    project_sharding_readers: tuple[str, ...] = ()  # calls of other files' functions reading loaders they build so sharded (same)
    project_gathering_readers: tuple[str, ...] = ()  # ... of those, the ones that gather what they compute across the processes themselves (same)
    project_batch_params: tuple[tuple[str, str, str, str], ...] = ()  # own methods a loop of another file hands a loader's batch: (Class.method, parameter, where, loader) (project/batch_params.py)
    project_iterators: tuple[str, ...] = ()  # own parameters callers hand a batch iterator that is no DataLoader (project/iterators.py)
    # own classes whose `__iter__` draws the batches of a DataLoader they keep, iterated by a training
    # loop of another file: (class, attribute, where the loop is) (project/wrapped_loaders.py)
    project_wrapped_loaders: tuple[tuple[str, str, str], ...] = ()
    # ... and those loops, in the file holding them: (name iterated, line, class, where its DataLoader is built)
    project_wrapper_loops: tuple[tuple[str, int, str, str], ...] = ()
    project_states: tuple[tuple[str, tuple[int, ...], tuple[str, ...], bool], ...] = ()  # calls that save/load a model's state: positions, names, writes a file
    project_plain: tuple[str, ...] = ()  # calls of functions migrated with this file that need no Accelerator
    project_unthreaded: tuple[tuple[str, bool], ...] = ()
    project_refused: tuple[str, ...] = ()  # calls of the run's training functions whose own migration with the Accelerator was left as written (project/decide.py)  # calls of run functions given no Accelerator: (spelling, it trains)
    project_evaluations: tuple[str, ...] = ()  # calls of the run's evaluation functions and classes, threaded or not (project/decide.py)
    project_placing: tuple[str, ...] = ()  # calls of the run's functions and classes that move tensors to a device themselves (project/decide.py)
    project_download_draws: tuple[tuple[str, str], ...] = ()  # ... of those, the ones drawing from a global random generator as they run: (spelling, where) (project/downloads.py)
    project_downloads: tuple[str, ...] = ()  # calls of other files' functions that download a data set (project/downloads.py)
    project_print_silencers: tuple[str, ...] = ()  # calls of other files' functions that silence print off the main process (project/print_silencers.py)
    # calls of other files' functions and the roles of their arguments by use there (project/param_roles.py)
    project_roles: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    project_entered: tuple[str, ...] = ()  # own top-level names other files of the run call once per process (project/entries.py)
    project_called: tuple[str, ...] = ()  # own top-level names other files of the run call at all (project/entries.py)
    project_called_any: tuple[str, ...] = ()  # the same, counting files around the run too (a required parameter breaks them)
    project_dir_makers: tuple[tuple[str, str, int, bool], ...] = ()  # calls of helpers of files the run only reads that create a folder racily: (spelling, where, position of the path or -1, cleared by shutil.rmtree first) (project/dir_makers.py)
    project_output_writers: tuple[tuple[str, str], ...] = ()  # calls of helpers of files the run only reads that write files among other work: (spelling, where the write is) (project/output_writers.py)
    project_savers: tuple[tuple[str, str, str], ...] = ()  # calls of methods of the run's model objects that torch.save on every call: (spelling, where, the call that made the object) (project/savers.py)
    project_file_keepers: tuple[tuple[str, int, str], ...] = ()  # calls of other files' classes keeping a file open for writing: (spelling, path position or -1, where) (project/open_files.py)
    project_unpassed: tuple[str, ...] = ()  # `function.parameter`: optional parameters no call of the run passes (project/unpassed.py)
    project_splits: tuple[tuple[str, str, str, str, int], ...] = ()  # calls of other files' helpers splitting data with a global generator: (spelling, draw, seed, the optional parameter it seeds with or "", its place or -1) (project/splits.py)
    project_seeded: tuple[str, ...] = ()  # global seeds the files calling this file's code set, alike on every process (project/splits.py)
    project_freezers: tuple[str, ...] = ()  # calls of other files' helpers that set requires_grad on a model's parameters (project/freezers.py)
    project_gated_writers: tuple[str, ...] = ()  # own functions that only write, called only by files of the run (their AM517) (project/writers.py)
    project_writers: tuple[tuple[str, int], ...] = ()  # calls of other files' helpers that only write a file: (spelling, path position or -1)
    project_enters: tuple[str, ...] = ()  # calls of other files' classes/functions that create the Accelerator themselves
    project_meters: tuple[str, ...] = ()  # calls of other files' running-meter classes (project/meters.py)
    project_loggers: tuple[str, ...] = ()  # calls of other files' classes that keep a TensorBoard writer (project/loggers.py)
    project_unused: tuple[tuple[str, str], ...] = ()  # model classes with unused parameters: call -> what (project/unused.py)
    project_members: tuple[str, ...] = ()  # calls of functions and classes of the run's other files (not those only read)
    # calls of other files' classes built on a class of a third file: (spelling, base, its file) (project/index.py)
    project_inherits: tuple[tuple[str, str, str], ...] = ()
    project_bases: tuple[str, ...] = ()  # own classes a class of another file of the run builds on (project/index.py)
    # calls of other files' functions, classes and instances' methods that train: (spelling, line, column, file, name, the file is in the run) (project/drives.py)
    project_drives: tuple[tuple[str, int, int, str, str, bool, str], ...] = ()  # ..., in the run, a read-only file holding it back
    # the folder of a project of its own this file's package installs from (st-gcn's torchlight/,
    # holding torchlight/torchlight/): the installed copy is what runs (project/index.py)
    project_installed: str = ""
    # calls of distribution helpers of other files: (spelling, kind, attributes, print helper) (project/dist_helpers.py)
    project_distribution: tuple[tuple[str, str, tuple[tuple[str, str], ...], str], ...] = ()

    @property
    def run_callers(self) -> frozenset[str]:
        """This file's top-level names that other files of the run call or construct, and
        `Base.*` for a class another file's class builds on: all its methods may run there."""
        return frozenset(self.project_called) | frozenset(self.project_entered) | {f"{b}.*" for b in self.project_bases}

    def for_file(self, path: str) -> Config:
        """This config with the codes `per_file_ignores` lists for `path` added to `ignore`."""
        extra = tuple(
            code for pattern, codes in self.per_file_ignores
            if glob_match(self._relative(path), pattern) for code in codes
        )
        return replace(self, ignore=self.ignore + extra) if extra else self

    def excludes(self, path: str) -> bool:
        """Whether an `exclude` glob matches `path` or one of its parent directories."""
        return any(glob_match(self._relative(path), pattern) for pattern in self.exclude)

    def _relative(self, path: str) -> PurePosixPath:
        root = os.path.abspath(self.root or os.curdir)
        rel = os.path.relpath(os.path.abspath(path), root)
        return PurePosixPath(rel.replace(os.sep, "/"))


def glob_match(rel: PurePosixPath, pattern: str) -> bool:
    """Ruff-like globs: a pattern without "/" matches any path component (`tests`,
    `*_test.py`); one with "/" matches the relative path or a parent directory of it.
    """
    pattern = pattern.strip().rstrip("/")
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if not pattern:
        return False
    if "/" not in pattern:
        return any(fnmatch.fnmatchcase(part, pattern) for part in rel.parts)
    candidates = [rel, *rel.parents]
    return any(fnmatch.fnmatchcase(str(p), pattern) for p in candidates if str(p) != ".")


class ConfigError(Exception):
    """An invalid `[tool.accel-migrate]` table; the message names the pyproject file."""

    def __init__(self, path: str, reason: str, line: int = 1, col: int = 1) -> None:
        super().__init__(f"{path}:{line}:{col}: error: invalid configuration: {reason}")
        self.path = path
        self.reason = reason
        self.line = line
        self.col = col


@dataclass(frozen=True)
class Overrides:
    """What the command line says; None/empty means "not given, keep the project's".

    Ruff's layering: `select` given here replaces the project's select *and* ignore;
    `ignore` and `exclude` given here add to the project's.
    """

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    target: Target | None = None
    unsafe_fixes: bool | None = None
    fix: bool = True

    def apply(self, base: Config) -> Config:
        """`base` (from pyproject.toml, or defaults) with the command line on top."""
        select, ignore = base.select, base.ignore
        if self.select is not None:
            select, ignore = self.select, ()
        return replace(
            base,
            select=select,
            ignore=ignore + self.ignore,
            exclude=base.exclude + self.exclude,
            target=self.target or base.target,
            unsafe_fixes=base.unsafe_fixes if self.unsafe_fixes is None else self.unsafe_fixes,
            fix=self.fix,
        )


def find_pyproject(start: str) -> str | None:
    """The nearest pyproject.toml with a `[tool.accel-migrate]` table, from `start` up."""
    directory = os.path.abspath(start)
    if not os.path.isdir(directory):
        directory = os.path.dirname(directory)
    while True:
        candidate = os.path.join(directory, PYPROJECT)
        if os.path.isfile(candidate) and _has_section(candidate):
            return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _has_section(path: str) -> bool:
    """Cheap textual check before parsing: Ruff also skips pyprojects without its table."""
    try:
        with open(path, "rb") as fh:
            text = fh.read()
    except OSError:
        return False
    return f"tool.{SECTION}".encode() in text or f'tool."{SECTION}"'.encode() in text


def load_pyproject(path: str) -> Config:
    """Parse `[tool.accel-migrate]` of `path` into a Config rooted at its directory."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: the same parser, published as tomli
        import tomli as tomllib

    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8")
        data = tomllib.loads(text)
    except OSError as exc:
        raise ConfigError(path, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(path, f"not valid TOML: not UTF-8 ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        line, col = _toml_position(str(exc), text)
        raise ConfigError(path, f"not valid TOML: {exc}", line, col) from None
    table = data.get("tool", {}).get(SECTION, {})
    return _parse_table(path, table)


_KEYS = ("select", "ignore", "per-file-ignores", "exclude", "target", "unsafe-fixes")


def _parse_table(path: str, table: Any) -> Config:
    if not isinstance(table, dict):
        raise ConfigError(path, f"[tool.{SECTION}] must be a table")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigError(path, f"unknown key {unknown[0]!r} (known: {', '.join(_KEYS)})")
    target = table.get("target", Target.RUNTIME.value)
    if target not in {t.value for t in Target}:
        raise ConfigError(path, f"target must be one of {[t.value for t in Target]}, not {target!r}")
    unsafe = table.get("unsafe-fixes", False)
    if not isinstance(unsafe, bool):
        raise ConfigError(path, "unsafe-fixes must be true or false")
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(path, "per-file-ignores must be a table of glob = [codes]")
    return Config(
        select=_strings(path, table, "select"),
        ignore=_strings(path, table, "ignore"),
        target=Target(target),
        unsafe_fixes=unsafe,
        per_file_ignores=tuple(
            (glob, _strings(path, per_file, glob, key=f"per-file-ignores.{glob!r}")) for glob in per_file
        ),
        exclude=_strings(path, table, "exclude"),
        root=os.path.dirname(os.path.abspath(path)),
    )


def _strings(path: str, table: dict, name: str, *, key: str | None = None) -> tuple[str, ...]:
    value = table.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(path, f"{key or name} must be a list of strings")
    return tuple(value)


def _toml_position(message: str, text: str) -> tuple[int, int]:
    """tomllib puts the position only in the message: "(at line 3, column 5)" or
    "(at end of document)"."""
    import re

    match = re.search(r"line (\d+), column (\d+)", message)
    if match:
        return int(match.group(1)), int(match.group(2))
    if "end of document" in message:
        lines = text.splitlines() or [""]
        return len(lines), len(lines[-1]) + 1
    return 1, 1


class ConfigResolver:
    """The Config for each file: nearest `[tool.accel-migrate]` + the command line.

    Cached per directory, so a walk over a tree reads each pyproject.toml once.
    `isolated` ignores every pyproject.toml (defaults + command line only).
    """

    def __init__(self, overrides: Overrides | None = None, *, isolated: bool = False) -> None:
        self.overrides = overrides or Overrides()
        self.isolated = isolated
        self._by_dir: dict[str, str | None] = {}
        self._by_file: dict[str | None, Config | ConfigError] = {}

    def pyproject_for(self, path: str) -> str | None:
        """The pyproject.toml that governs `path`, or None."""
        if self.isolated:
            return None
        directory = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path) or os.curdir)
        if directory not in self._by_dir:
            self._by_dir[directory] = find_pyproject(directory)
        return self._by_dir[directory]

    def config_for(self, path: str) -> Config:
        """The Config for `path`; raises ConfigError when its pyproject.toml is invalid."""
        pyproject = self.pyproject_for(path)
        if pyproject not in self._by_file:
            try:
                base = load_pyproject(pyproject) if pyproject else Config()
                self._by_file[pyproject] = self.overrides.apply(base)
            except ConfigError as exc:
                self._by_file[pyproject] = exc
        found = self._by_file[pyproject]
        if isinstance(found, ConfigError):
            raise found
        return found

    def excluded(self, path: str) -> bool:
        """Whether `exclude` (project's + command line's) drops `path`; never raises."""
        try:
            return self.config_for(path).excludes(path)
        except ConfigError:
            return False
