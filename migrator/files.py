"""Reading, walking and writing Python files on disk, and nothing else.

Decoding is LibCST's job (PEP 263 cookie, BOM); here bytes come in and bytes go out,
never half-written (atomic replace) and never over a file that changed since it was read.
Every failure a user can cause is an InputError carrying the path and a one-line reason.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

# Directories that never hold the user's own training scripts.
SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", "__pycache__", "node_modules", "site-packages",
    "build", "dist", ".ipynb_checkpoints", ".accel-migrate-cache",
})


class InputError(Exception):
    """A problem with one file that the user can fix: one line, path and position.

    `code` is the error code the results carry (E003 cannot read, E004 not Python
    source, E005 cannot write, E006 changed on disk).
    """

    def __init__(self, path: str, reason: str, *, code: str = "E003", line: int = 1, col: int = 1) -> None:
        super().__init__(f"{path}:{line}:{col}: error: {reason}")
        self.path = path
        self.reason = reason
        self.code = code
        self.line = line
        self.col = col


@dataclass(frozen=True)
class Source:
    """A file's bytes as read, with the stamp a later write compares against."""

    path: str
    data: bytes
    mtime_ns: int
    size: int


def _reason(exc: OSError) -> str:
    """`[Errno 13] Permission denied: 'x'` → `permission denied` (the path is printed once)."""
    text = exc.strerror or str(exc)
    if exc.errno == errno.ELOOP:
        text = "symbolic link loop"
    return text[:1].lower() + text[1:]


def read_source(path: str) -> Source:
    """Read `path` as bytes; refuse binary files (NUL bytes) with a clear reason."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device would block or never end
            kind = "a directory" if os.path.isdir(path) else "not a regular file"
            raise InputError(path, f"cannot read: {kind}")
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            data = fh.read()
    except OSError as exc:
        raise InputError(path, f"cannot read: {_reason(exc)}") from None
    if b"\0" in data:
        raise InputError(path, "not Python source: binary file (contains NUL bytes)", code="E004")
    return Source(path, data, st.st_mtime_ns, st.st_size)


def write_back(source: Source, data: bytes) -> None:
    """Replace `source.path` with `data` atomically, keeping its permission bits.

    Refuses (InputError E006) when the file on disk is no longer what was read: another
    tool or an editor changed it meanwhile, and writing would lose that change.
    """
    path = source.path
    real = os.path.realpath(path)  # write through a symlink, never replace the link
    try:
        st = os.stat(real)
        with open(real, "rb") as fh:
            current = fh.read()
    except OSError as exc:
        raise InputError(path, f"cannot write: {_reason(exc)}", code="E005") from None
    if (st.st_mtime_ns, st.st_size) != (source.mtime_ns, source.size) or current != source.data:
        raise InputError(path, "not written: the file changed on disk since it was read; run again", code="E006")
    if not os.access(real, os.W_OK):
        raise InputError(path, "cannot write: permission denied", code="E005")
    _replace(path, real, data, stat.S_IMODE(st.st_mode))


def write_new(path: str, data: bytes, mode: int | None = None) -> None:
    """Write `data` to `path` (created or replaced) atomically; for `--output`."""
    real = os.path.realpath(path)
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    if os.path.isdir(real):
        raise InputError(path, "cannot write: is a directory", code="E005")
    _replace(path, real, data, mode)


def check_writable(path: str) -> None:
    """Raise InputError (E005) now if `write_new(path, ...)` would certainly fail: for an
    output named up front, so a run refuses before it writes anything else."""
    real = os.path.realpath(path)
    directory = os.path.dirname(real) or "."
    if os.path.isdir(real):
        reason = "is a directory"
    elif not os.path.isdir(directory):
        reason = "no such directory"
    elif not os.access(directory, os.W_OK | os.X_OK):
        reason = "permission denied"
    else:
        return
    raise InputError(path, f"cannot write: {reason}", code="E005")


def _replace(path: str, real: str, data: bytes, mode: int) -> None:
    """Temp file in the same directory, fsync, chmod, os.replace: all or nothing."""
    directory = os.path.dirname(real) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise InputError(path, f"cannot write: {_reason(exc)}", code="E005") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except OSError as exc:
        _unlink_quietly(tmp)
        raise InputError(path, f"cannot write: {_reason(exc)}", code="E005") from None
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _fsync_directory(directory)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _fsync_directory(directory: str) -> None:
    """Make the rename itself durable where the platform allows it (POSIX)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def python_files(paths: Iterable[str], excluded: Callable[[str], bool] = lambda p: False) -> Iterator[str]:
    """Expand directories into their `*.py` and `*.ipynb` files, sorted; keep other paths as given.

    A path that is not a directory is yielded even when missing or unreadable, so reading
    it reports why. Symlinked directories are not followed (no loops); symlinked files are.
    `excluded` prunes files and whole directories (config `exclude`).
    """
    for path in paths:
        if excluded(path):
            continue
        if not os.path.isdir(path):
            yield path
            continue
        for root, dirs, names in os.walk(path, followlinks=False):
            dirs[:] = sorted(
                d for d in dirs
                if d not in SKIP_DIRS and not d.endswith(".egg-info")
                and not _is_venv(os.path.join(root, d)) and not excluded(os.path.join(root, d))
            )
            for name in sorted(names):
                full = os.path.normpath(os.path.join(root, name))  # "./a.py" → "a.py"
                if name.endswith((".py", ".ipynb")) and not excluded(full):
                    yield full


def _is_venv(directory: str) -> bool:
    """A virtual environment under any name carries a pyvenv.cfg."""
    return os.path.exists(os.path.join(directory, "pyvenv.cfg"))
