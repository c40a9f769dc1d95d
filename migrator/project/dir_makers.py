"""Helpers of files the run only reads that create a directory no process may find made.

`create_dirs([config.log_dir, ...])` (utils/dirs.py: `if not os.path.exists(d):
os.makedirs(d)`) or `Visualizer(opt)`, whose `__init__` calls `util.mkdirs(...)`: run by
every process, all of them can find the folder missing, and any that creates it after
another did stops with FileExistsError. AM518 fixes such a creation in a file the run
writes; in a file it only reads it cannot, so the call that reaches it (in a file the run
migrates or runs on every process) is named, with where the creation is
(`Config.project_dir_makers`). Read with `ast`, through the run's own calls: a function
that calls another of the run that creates such a folder creates it too.
"""

from __future__ import annotations

import ast
import os

from migrator.analysis.ast_imports import qualify
from migrator.project.index import FileIndex, chain, init_of, trees_mentioning

_TOLERATED = {"OSError", "FileExistsError", "Exception", "IOError"}
_MAIN_WORDS = ("rank", "main_process", "process_index", "is_master", "is_main")


def dir_maker_calls(
    sources: dict[str, bytes], files: dict[str, FileIndex], read_only: frozenset[str],
) -> dict[str, tuple[tuple[str, str, int, bool], ...]]:
    """For each file the run writes: its calls of functions and classes of files it only
    reads that create a directory on every call, as (spelling, where the creation is,
    relative to the caller's folder, the position of the argument that is the folder or -1,
    whether a `shutil.rmtree` of that folder comes first: a fresh folder each call, which
    `exist_ok=True` would not make safe)."""
    bodies = _bodies(sources, files)
    # (file, name) -> (creation, its file, line, position, cleared first)
    racy: dict[tuple[str, str], tuple[str, str, int, int, bool]] = {}
    for key, (node, imports) in bodies.items():
        found = _creation(node, imports)
        if found is not None:
            racy[key] = (found[0], key[0], found[1], _position(node, found[2]), _cleared_first(node, found[2], imports))
    for _ in range(3):  # through the run's own calls: Visualizer.__init__ → util.mkdirs → mkdir
        for (path, name), (node, _) in bodies.items():
            if (path, name) in racy:
                continue
            targets = {c.spelling: c.target for c in files[path].calls}
            for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
                spelling = chain(call.func)
                target = (path, spelling) if (path, spelling) in bodies else targets.get(spelling or "")
                if target in racy and target != (path, name):
                    creation, where, line, position, cleared = racy[target]
                    handed = call.args[position] if 0 <= position < len(call.args) else None
                    racy[(path, name)] = (creation, where, line, _position(node, handed), cleared)
                    break
    out: dict[str, set[tuple[str, str, int, bool]]] = {}
    for path, f in files.items():
        if path in read_only:
            continue
        for call in f.calls:
            if call.target in racy and call.target[0] in read_only and call.target[0] != path and not call.main_only:
                creation, where, line, position, cleared = racy[call.target]
                shown = os.path.relpath(where, os.path.dirname(path) or ".").replace(os.sep, "/")
                out.setdefault(path, set()).add((call.spelling, f"`{creation}` ({shown}:{line})", position, cleared))
    return {path: tuple(sorted(calls)) for path, calls in out.items()}


def _position(function: ast.FunctionDef, value: ast.AST | None) -> int:
    """The position, among the arguments a caller passes, of the parameter `value` is
    (`self` of an `__init__` not counted); -1 when it is not a parameter."""
    params = [a.arg for a in function.args.args]
    if function.name == "__init__":
        params = params[1:]
    return params.index(value.id) if isinstance(value, ast.Name) and value.id in params else -1


def _bodies(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[tuple[str, str], tuple[ast.AST, dict[str, str]]]:
    """(file, name) → the top-level function (a class: its `__init__`) and the file's imports,
    for the files that create a directory at all."""
    out = {}
    for path, tree, imports in trees_mentioning(sources, files, (b"mkdir", b"makedirs")):
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                out[(path, node.name)] = (node, imports)
            elif isinstance(node, ast.ClassDef) and (init := init_of(node)) is not None:
                out[(path, node.name)] = (init, imports)
    return out


def _creation(function: ast.AST, imports: dict[str, str]) -> tuple[str, int, ast.expr] | None:
    """The first `os.makedirs(path)` (no `exist_ok`) or `os.mkdir(path)` the function makes
    on every call: not in a `try` that lets an existing folder pass, not under a test of
    the process, not on a path made from the rank."""
    for node, guarded in guarded_walk(function, False):
        if guarded or not isinstance(node, ast.Call) or not node.args:
            continue
        qualified = qualify(node.func, imports)
        if qualified not in ("os.makedirs", "os.mkdir"):
            continue
        if any(k.arg == "exist_ok" for k in node.keywords) or len(node.args) > 2:
            continue
        path = ast.unparse(node.args[0])
        if any(word in path for word in _MAIN_WORDS):
            continue
        return f"{qualified}({path if len(path) <= 30 else '...'})", node.lineno, node.args[0]
    return None


def _cleared_first(function: ast.AST, folder: ast.expr, imports: dict[str, str]) -> bool:
    """`shutil.rmtree(folder)` above the creation in the function (stargan-v2's
    `calculate_metrics`: `shutil.rmtree(path_fake, ignore_errors=True)` then
    `os.makedirs(path_fake)`)."""
    text = ast.unparse(folder)
    return any(
        isinstance(n, ast.Call) and n.args and qualify(n.func, imports) == "shutil.rmtree"
        and ast.unparse(n.args[0]) == text and n.lineno <= folder.lineno
        for n in ast.walk(function)
    )


def guarded_walk(node: ast.AST, guarded: bool):
    """Each node below `node`, with whether a tolerant `try` or a test of the process
    (`if rank == 0:`) stands between."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        inner = guarded
        if isinstance(child, ast.Try) and any(_tolerates(h) for h in child.handlers):
            inner = True
        if isinstance(child, ast.If) and any(word in ast.unparse(child.test).lower() for word in _MAIN_WORDS):
            inner = True
        yield child, inner
        yield from guarded_walk(child, inner)


def _tolerates(handler: ast.ExceptHandler) -> bool:
    """`except OSError: pass`: an existing folder is let through (a handler that logs and
    exits still stops the process that lost the race)."""
    if not all(isinstance(s, (ast.Pass, ast.Continue)) for s in handler.body):
        return "EEXIST" in ast.unparse(handler)
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(ast.unparse(k).rsplit(".", 1)[-1] in _TOLERATED for k in kinds)
