"""Parameters handed a batch iterator that is no DataLoader.

Chinese-Text-Classification's run.py builds `train_iter = build_iterator(train_data,
config)`, an instance of its own `DatasetIterater`, and hands it to `train(config, model,
train_iter, ...)` of train_eval.py. There the loop over `train_iter` calls backward, so the
parameter read as a loader, and the migration wrote `accelerator.prepare(..., train_iter)`:
prepare() raises on it at start, on one process too (reader R2, seventeenth session). The
callers say what it is.
"""

from __future__ import annotations

import ast
import os

from migrator.project.index import FileIndex, chain, resolve_module, run_root


def iterator_params(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file of the run: the parameters of its functions (and of its classes'
    `__init__`) that a caller in another file hands a batch iterator of the run's own."""
    out: dict[str, set[str]] = {}
    names = {name.encode() for f in files.values() for name, function in f.functions.items() if function.batch_iterator}
    if not names:
        return {}
    run = {os.path.abspath(p): p for p in files}
    root = run_root(run) if run else ""
    for path, f in files.items():
        if not any(name in sources.get(path, b"") for name in names):
            continue  # names none of them: nothing to parse
        try:
            tree = ast.parse(sources.get(path, b""))
        except (SyntaxError, ValueError):
            continue
        made = {c.spelling for c in f.calls if _hands_out_iterators(files, c.target)} | _imported_anywhere(tree, path, files, run, root)
        made |= {name for name, function in f.functions.items() if function.batch_iterator}  # defined in the caller's own file
        if not made:
            continue
        bound = {
            t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
            and chain(n.value.func) in made for t in n.targets if isinstance(t, ast.Name)
        }

        def iterator(expr: ast.AST) -> bool:  # `train_iter`, or `DatasetIterater(data)` built in the call
            return isinstance(expr, ast.Name) and expr.id in bound or isinstance(expr, ast.Call) and chain(expr.func) in made

        targets = {c.spelling: c.target for c in f.calls if c.target[0] != path}
        for node in ast.walk(tree):
            target = targets.get(chain(node.func) or "") if isinstance(node, ast.Call) else None
            owner = files.get(target[0]) if target else None
            function = owner.functions.get(target[1]) if owner else None
            if function is None:
                continue
            given = list(zip(function.params, node.args)) + [(k.arg, k.value) for k in node.keywords if k.arg]
            found = {param for param, expr in given if iterator(expr)}
            if found:
                out.setdefault(target[0], set()).update(found)
    return {path: tuple(sorted(names)) for path, names in out.items()}


def _imported_anywhere(tree: ast.Module, path: str, files: dict[str, FileIndex], run: dict[str, str], root: str) -> set[str]:
    """Names imported in a branch or a function (`if model_name == 'FastText': from
    utils_fasttext import build_iterator` / `else: from utils import build_iterator`),
    which the index leaves out, that name a batch iterator of the run: in that branch at
    least the value is no DataLoader."""
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node in tree.body:
            continue
        target = resolve_module(node.module or "", node.level, path, run, root)
        for alias in node.names if target is not None else ():
            if _hands_out_iterators(files, (target, alias.name)):
                out.add(alias.asname or alias.name)
    return out


def _hands_out_iterators(files: dict[str, FileIndex], target: tuple[str, str]) -> bool:
    owner = files.get(target[0])
    function = owner.functions.get(target[1]) if owner else None
    return function is not None and function.batch_iterator
