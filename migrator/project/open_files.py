"""Classes of the run whose objects keep a file open for writing.

open-reid's and deep-person-reid's `Logger(fpath)` (`self.file = open(fpath, 'w')` in its
`__init__`, then every `write` copied there) is built once per run, often as
`sys.stdout = Logger(path)`. Under the launcher every process builds it: N processes
truncate the one file and write into it at once, and the log is a garble of all of them.
The class's file cannot fix it (it does not know the processes); the call that builds it
can, so the call is named (AM517, `Config.project_file_keepers`). Read with `ast`.
"""

from __future__ import annotations

import ast
import os

from migrator.analysis.ast_imports import qualify
from migrator.project.index import FileIndex, init_of, trees_mentioning

_OPENERS = {"open", "builtins.open", "io.open", "codecs.open"}


def file_keeper_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, int, str], ...]]:
    """For each file of the run: its calls of classes of another file whose `__init__`
    keeps a file opened for writing, as (spelling, position of the path parameter among
    the arguments a caller passes, or -1 when the path is built inside, where the file is
    opened, relative to the caller's folder)."""
    keepers: dict[tuple[str, str], tuple[int, int]] = {}  # (file, class) -> (position, line)
    for path, tree, imports in trees_mentioning(sources, files, (b"open(",)):
        for node in tree.body:
            init = init_of(node) if isinstance(node, ast.ClassDef) else None
            kept = _kept_open(init, imports) if init is not None else None
            if kept is not None:
                keepers[(path, node.name)] = kept
    out: dict[str, set[tuple[str, int, str]]] = {}
    for path, f in files.items():
        for call in f.calls:
            if call.target in keepers and call.target[0] != path and not call.main_only and not call.has_star:
                position, line = keepers[call.target]
                shown = os.path.relpath(call.target[0], os.path.dirname(path) or ".").replace(os.sep, "/")
                out.setdefault(path, set()).add((call.spelling, position, f"{shown}:{line}"))
    return {path: tuple(sorted(calls)) for path, calls in out.items()}


def _kept_open(init: ast.FunctionDef, imports: dict[str, str]) -> tuple[int, int] | None:
    """(the position of the parameter opened, or -1; the line) of the first
    `self.x = open(path, 'w')` of `init`, outside any test of the process."""
    params = [a.arg for a in init.args.args][1:]
    for node in ast.walk(init):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        if not any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" for t in node.targets):
            continue
        call = node.value
        if qualify(call.func, imports) not in _OPENERS and not (isinstance(call.func, ast.Name) and call.func.id == "open"):
            continue
        if not call.args or not _writes(call):
            continue
        if any(word in ast.unparse(call.args[0]).lower() for word in ("rank", "process_index", "local_rank")):
            return None  # a file of each process's own
        first = call.args[0]
        position = params.index(first.id) if isinstance(first, ast.Name) and first.id in params else -1
        return position, node.lineno
    return None


def _writes(call: ast.Call) -> bool:
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")
