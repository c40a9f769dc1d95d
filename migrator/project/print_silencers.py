"""Functions of the run that silence `print` off the main process, read from their bodies.

Research code often replaces the builtin on the other processes (`setup_for_distributed
(is_master)`: `builtins.print = print` with a wrapper that prints only when `is_master`),
usually from a set-up helper (`init_distributed_mode(args)`) that the set-up file calls.
Every later `print`, in that file and in the engine it drives, then runs once. The set-up
is migrated with `Config.project_print_silencers` naming those calls, and AM511 leaves the
prints of a run that makes one alone. Read with `ast`; a function that calls another of
its file that silences print silences it too.
"""

from __future__ import annotations

import ast

from migrator.project.index import FileIndex

_MARK = b".print"
_BUILTINS = ("builtins", "__builtin__")


def print_silencer_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file of the run that calls a print-silencing function of another file:
    the calls as spelled there, as Config.project_print_silencers takes them."""
    targets = {c.target for f in files.values() for c in f.calls if c.target[0] != f.path}
    silencing: set[tuple[str, str]] = set()
    for path in sorted({t[0] for t in targets}):
        if _MARK not in sources.get(path, b""):
            continue
        try:
            tree = ast.parse(sources[path])
        except (SyntaxError, ValueError):
            continue
        silencing |= {(path, name) for name in silencers(tree)}
    out = {}
    for path, f in files.items():
        calls = {c.spelling for c in f.calls if c.target in silencing and c.target[0] != path}
        if calls:
            out[path] = tuple(sorted(calls))
    return out


def silencers(tree: ast.Module) -> set[str]:
    """The module's top-level functions that replace the builtin print, directly or
    through another one."""
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    found = {name for name, f in functions.items() if replaces_print(f)}
    for _ in range(2):
        found |= {
            name for name, f in functions.items()
            if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in found for n in ast.walk(f))
        }
    return found


_PER_PROCESS = ("master", "rank", "is_main", "gpu", "process_index")


def replaces_print(node: ast.AST) -> bool:
    """`builtins.print = ...` (or `__builtin__.print`, under any import alias ending so)
    somewhere in `node`, in code that tells the processes apart (`is_master`, a rank): a
    flag that silences every process or none (`if args.quiet:`) is not this."""
    if not any(word in ast.unparse(node) for word in _PER_PROCESS):
        return False
    for n in ast.walk(node):
        if isinstance(n, ast.Assign):
            for target in n.targets:
                if isinstance(target, ast.Attribute) and target.attr == "print" and isinstance(target.value, ast.Name):
                    if target.value.id in _BUILTINS or target.value.id.endswith("__builtin__"):
                        return True
    return False
