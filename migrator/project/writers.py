"""Helpers of another file of the run that do nothing but write a file
(`utils.save_config(config)`, `utils.save_dict_to_json(metrics, path)`, a
`save_checkpoint(state, ...)` that torch.saves what it is given and copies it to `best.pt`). Called by every
process, N processes truncate and write one file at once; the caller can put such a call
on the main process (AM517), since nothing it does is needed by the others. A method of a
class of the run that only writes (pix2pixHD's `Visualizer.print_current_errors`, appending
to its log) is such a helper too, called on an instance (`visualizer.print_current_errors(...)`)."""

from __future__ import annotations

import ast

from migrator.analysis.only_writes import ModuleWriters, only_writes
from migrator.project.entries import instance_method_calls
from migrator.project.index import FileIndex


def writer_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, int], ...]]:
    """For each file of the run: its calls of other files' functions that only write a
    file, as (spelling, position of the path parameter the helper opens, or -1)."""
    writers: dict[tuple[str, str], int] = {}
    for path, f in files.items():
        try:
            tree = ast.parse(sources[path])
        except (SyntaxError, ValueError):
            continue
        module = ModuleWriters(tree)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in f.functions and not f.functions[node.name].is_class:
                position = only_writes(node, module)
                if position is not None:
                    writers[(path, node.name)] = position
    methods = _writing_methods(sources, files)
    out: dict[str, set[tuple[str, int]]] = {}
    for path, f in files.items():
        for call in f.calls:
            if call.target[0] != path and call.target in writers and not call.has_star:
                out.setdefault(path, set()).add((call.spelling, writers[call.target]))
        out.setdefault(path, set()).update(_method_calls(sources.get(path, b""), f, files, methods, path))
    return {path: tuple(sorted(calls)) for path, calls in out.items() if calls}


def writers_callers_gate(sources: dict[str, bytes], files: dict[str, FileIndex], read_only: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """For each file: its functions that only write a file and that only files of the run
    itself call (none it merely reads). Each such call is the caller's AM517 (gated on the
    main process, or named there), so the helper's own torch.save is not named again as
    code other files run on every process (SRGAN's save_checkpoint, gated by the migrated
    train_gan.py)."""
    out: dict[str, set[str]] = {}
    callers: dict[tuple[str, str], set[str]] = {}
    for path, f in files.items():
        for call in f.calls:
            if call.target[0] != path:
                callers.setdefault(call.target, set()).add(path)
    for (path, name), who in callers.items():
        if path not in files or who & read_only or name not in files[path].functions or files[path].functions[name].is_class:
            continue
        try:
            tree = ast.parse(sources[path])
        except (SyntaxError, ValueError, KeyError):
            continue
        node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
        if node is not None and only_writes(node, ModuleWriters(tree)) is not None:
            out.setdefault(path, set()).add(name)
    return {path: tuple(sorted(names)) for path, names in out.items()}


def _writing_methods(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[tuple[str, str, str], int]:
    """(file, class, method) → the position (less `self`) of the path it opens, or -1, for
    the methods of the run's classes that only write a file."""
    out = {}
    for path, f in files.items():
        classes = [name for name, fn in f.functions.items() if fn.is_class]
        if not classes:
            continue
        try:
            tree = ast.parse(sources[path])
        except (SyntaxError, ValueError):
            continue
        module = ModuleWriters(tree)
        for node in tree.body:
            if not isinstance(node, ast.ClassDef) or node.name not in classes:
                continue
            for method in node.body:
                if isinstance(method, ast.FunctionDef) and not method.name.startswith("__") and method.args.args:
                    position = only_writes(method, module)
                    if position is not None:
                        out[(path, node.name, method.name)] = position - 1 if position > 0 else -1
    return out


def _method_calls(source: bytes, f: FileIndex, files: dict[str, FileIndex], methods: dict, path: str) -> set[tuple[str, int]]:
    """`visualizer.print_current_errors(...)` on `visualizer = Visualizer(opt)` of another file."""
    if not methods:
        return set()
    return {
        (f"{name}.{method}", methods[(*target, method)]) for name, target, method in instance_method_calls(source, f, files)
        if target[0] != path and (*target, method) in methods
    }
