"""The project's Python files around the files of a run: read to decide, never written
or reported.

The pre-commit hook hands the tool only the files a commit changed, often one engine
module whose callers live elsewhere in the repository (the hook runs at its root). What
the run decides for a file depends on those callers: what they prepare, whether they pass
the Accelerator, what another file's helpers do. So the files in each run file's folder
and the folders above it, up to the working directory, are read too; the project's
analysis (migrator/project/) takes the ones that import or are imported by the run's
files, and holds back anything that would need one of them changed.
"""

from __future__ import annotations

import os
import re

_LARGEST = 1_000_000  # bytes: a generated module this big calls nothing of ours


def folders_around(paths: list[str]) -> list[str]:
    """Each file's folder and the folders above it, up to the working directory (only its
    own folder for a file outside it), absolute, each once, in order."""
    here = os.path.abspath(os.curdir)
    out: list[str] = []
    for path in paths:
        folder = os.path.dirname(os.path.abspath(path))
        chain = [folder]
        while folder.startswith(here + os.sep):
            folder = os.path.dirname(folder)
            chain.append(folder)
        out += [f for f in chain if f not in out]
    return out


def read_around(paths: list[str], limit: int = 500) -> dict[str, bytes]:
    """The Python files of `folders_around(paths)` that are not among `paths`, and the
    modules of the project those files and the run's import (`from utils.train_utils
    import ...` reads utils/train_utils.py and utils/__init__.py), followed from module
    to module: path (as the run's own paths are spelled, relative or absolute) → bytes.
    At most `limit` files; unreadable and very large ones are left out."""
    run = {os.path.abspath(p) for p in paths}
    relative = bool(paths) and not any(os.path.isabs(p) for p in paths)
    folders = folders_around(paths)
    found: dict[str, bytes] = {}
    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if name.endswith(".py"):
                _read(os.path.join(folder, name), run, found, limit)
    queue = [(p, _data(p)) for p in sorted(run)] + list(found.items())
    while queue and len(found) < limit:
        path, data = queue.pop(0)
        for module in _imported_modules(data or b""):
            for full in _module_files(module, os.path.dirname(path), folders):
                if full not in found and full not in run and _read(full, run, found, limit):
                    queue.append((full, found[full]))
    return {os.path.relpath(full) if relative else full: data for full, data in found.items()}


_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import[ \t]+([\w, \t()*]+)|import[ \t]+([\w., \t]+))", re.MULTILINE)


def _imported_modules(data: bytes) -> list[str]:
    """Dotted names an import may load: `from a.b import c, d` → a.b, a.b.c, a.b.d;
    `import a.b, e` → a.b, e; a relative one keeps its dots (`from .trainer import *` →
    .trainer; `from . import engine` → .engine) (textual, as project.linked reads imports)."""
    out = []
    for frm, names, plain in _IMPORT.findall(data):
        if frm:
            base = frm.decode()
            out.append(base)
            joint = "" if base.endswith(".") else "."
            out += [
                f"{base}{joint}{n.strip().split()[0]}" for n in names.decode().strip("() \t").split(",")
                if n.strip() and n.strip() != "*"
            ]
        else:
            out += [m.strip().split()[0] for m in plain.decode().split(",") if m.strip()]
    return out


def _module_files(module: str, here: str, folders: list[str]) -> list[str]:
    """The files `module` can be, looked up from `here` and the folders around the run
    (a relative one from `here` climbed by its dots, past the first), with the
    `__init__.py` of each package on the way."""
    dots = len(module) - len(module.lstrip("."))
    if dots:
        root = here
        for _ in range(dots - 1):
            root = os.path.dirname(root)
        roots, parts = [root], [p for p in module[dots:].split(".") if p]
    else:
        roots, parts = [here, *folders], module.split(".")
    out = []
    for root in roots:
        for i in range(1, len(parts) + 1):
            stem = os.path.join(root, *parts[:i])
            for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
                if os.path.isfile(candidate):
                    out.append(candidate)
    return out


def _data(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(_LARGEST + 1)
    except OSError:
        return None


def _read(full: str, run: set[str], found: dict[str, bytes], limit: int) -> bool:
    """Read `full` into `found` (not a file of the run, under the limits)."""
    if full in run or full in found or len(found) >= limit:
        return False
    try:
        if not os.path.isfile(full) or os.path.getsize(full) > _LARGEST:
            return False
        with open(full, "rb") as fh:
            found[full] = fh.read()
    except OSError:
        return False
    return True
