"""Parameters of the run's functions handed a batch of a loader loop in another file.

CenterNet's BaseTrainer (trains/base_trainer.py) runs `for iter_id, batch in
enumerate(data_loader)` and, under `--debug`, calls `self.debug(batch, output, iter_id)`,
a method each task's trainer overrides in a file of its own (trains/ctdet.py), where
`batch['meta']['gt_det'].numpy()` reads a CPU tensor. Once the loader is prepared, its
batches come on the device and that call raises (reader R7, 28th session). The file of
the method cannot see where its parameter comes from; the loop's file can.
"""

from __future__ import annotations

import ast
import os
import re

from migrator.project.index import FileIndex

_LOADER = re.compile(r"loader", re.IGNORECASE)
_WRAPPERS = ("enumerate", "tqdm", "iter")


def batch_params(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, str, str, str], ...]]:
    """For each file of the run that turns something to numpy: (`Class.method`, parameter,
    where the loop hands it a batch (`file:line`), the loader) for each method of its
    classes that a loop of another file hands a batch, through `self.method(batch)` in
    a class it builds on."""
    wanted = {path for path, source in sources.items() if path in files and b".numpy()" in source}
    if not wanted:
        return {}
    trees = {}
    for path in files:
        try:
            trees[path] = ast.parse(sources.get(path, b""))
        except (SyntaxError, ValueError):
            continue
    heirs = _heirs(files)
    out: dict[str, set[tuple[str, str, str, str]]] = {}
    for path, tree in trees.items():
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for method, position, line, loader in _batch_method_calls(cls):
                for owner, name in [(path, cls.name), *heirs.get((path, cls.name), ())]:
                    if owner == path or owner not in wanted or owner not in trees:
                        continue
                    param = _param_at(trees[owner], name, method, position)
                    if param:
                        where = f"{os.path.relpath(path, os.path.dirname(owner) or '.')}:{line}"
                        out.setdefault(owner, set()).add((f"{name}.{method}", param, where, loader))
    return {path: tuple(sorted(found)) for path, found in out.items()}


def _heirs(files: dict[str, FileIndex]) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """(file, class) -> the classes of the run built on it, however far down."""
    direct: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for path, f in files.items():
        for cls, bases in f.bases.items():
            for base in bases:
                direct.setdefault(base, set()).add((path, cls))
    out = {}
    for base in direct:
        seen, todo = set(), [base]
        while todo:
            for heir in direct.get(todo.pop(), ()):
                if heir not in seen:
                    seen.add(heir)
                    todo.append(heir)
        out[base] = seen
    return out


def _batch_method_calls(cls: ast.ClassDef):
    """(method, position among its arguments, line, loader) of each `self.method(..., batch, ...)`
    in a loop of the class over a loader (`for i, batch in enumerate(data_loader)`)."""
    for function in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
        for loop in (n for n in ast.walk(function) if isinstance(n, ast.For)):
            loader, batches = _loader_loop(loop)
            if not batches:
                continue
            for node in (n for s in loop.body for n in ast.walk(s)):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"):
                    continue
                for position, arg in enumerate(node.args):
                    if isinstance(arg, ast.Name) and arg.id in batches:
                        yield node.func.attr, position, node.lineno, loader


def _loader_loop(loop: ast.For) -> tuple[str, set[str]]:
    """The loader a loop draws from (a name saying so, through enumerate/tqdm) and the
    names its batches are bound to; ("", set()) for any other loop."""
    source, target = loop.iter, loop.target
    counted = False
    while isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id in _WRAPPERS and source.args:
        counted = counted or source.func.id == "enumerate"
        source = source.args[0]
    if not (isinstance(source, ast.Name) and _LOADER.search(source.id)):
        return "", set()
    if counted and isinstance(target, ast.Tuple) and len(target.elts) == 2:
        target = target.elts[1]
    names = [target] if isinstance(target, ast.Name) else list(target.elts) if isinstance(target, ast.Tuple) else []
    return source.id, {n.id for n in names if isinstance(n, ast.Name)}


def _param_at(tree: ast.Module, cls: str, method: str, position: int) -> str | None:
    """The parameter of `cls.method` (after `self`) an argument at `position` binds."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for function in node.body:
                if isinstance(function, ast.FunctionDef) and function.name == method:
                    params = [a.arg for a in function.args.posonlyargs + function.args.args][1:]
                    return params[position] if position < len(params) else None
    return None
