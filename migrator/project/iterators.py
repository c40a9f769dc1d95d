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

from migrator.analysis.ast_imports import qualify
from migrator.analysis.roles import library_batch_iterator
from migrator.project.entries import instances_of
from migrator.project.index import FileIndex, chain, resolve_module, run_root, trees_mentioning


def iterator_params(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file of the run: the parameters of its functions (and of its classes'
    `__init__`) that a caller in another file hands a batch iterator of the run's own, the
    names it binds to a library's batch iterators another file's function returns, and the
    plain lists it reaches on an object of the run's classes (`self.machine.clusters`)."""
    out: dict[str, set[str]] = {}
    for path, names in _bound_to_library_iterators(sources, files).items():
        out.setdefault(path, set()).update(names)
    for path, names in _plain_lists_of_handed_objects(sources, files).items():
        out.setdefault(path, set()).update(names)
    names = {name.encode() for f in files.values() for name, function in f.functions.items() if function.batch_iterator}
    if not names:
        return {path: tuple(sorted(found)) for path, found in out.items()}
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


def _bound_to_library_iterators(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, set[str]]:
    """keon/seq2seq's train.py: `train_iter, val_iter, test_iter, DE, EN =
    load_dataset(args.batch_size)`, where utils.py returns what torchtext's
    `BucketIterator.splits(...)` made: no DataLoader, so never prepared (prepare() would
    refuse it), and the loop over it reads the whole data on every process (AM218)."""
    returns, kept = {}, set()
    for path, tree, imports in trees_mentioning(sources, files, (b"Iterator",)):
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and (positions := _iterator_positions(node, imports)):
                returns[(path, node.name)] = positions
            elif isinstance(node, ast.ClassDef):
                kept |= _kept_iterators(node, imports)
    out: dict[str, set[str]] = {}
    for path, f in files.items() if returns or kept else ():
        targets = {c.spelling: c.target for c in f.calls if c.target in returns}
        if not targets and not any(attr.encode() in sources.get(path, b"") for attr in kept):
            continue
        try:
            tree = ast.parse(sources.get(path, b""))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):  # `iterator = data.train_iter`, `for batch in data.train_iter`
            if isinstance(node, ast.Attribute) and node.attr in kept and isinstance(node.value, ast.Name) and node.value.id != "self":
                out.setdefault(path, set()).add(f"{node.value.id}.{node.attr}")
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr in kept \
                    and isinstance(node.value.value, ast.Name) and node.value.value.id != "self":
                out.setdefault(path, set()).update(t.id for t in node.targets if isinstance(t, ast.Name))
        for node in ast.walk(tree) if targets else ():
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and chain(node.value.func) in targets):
                continue
            positions = returns[targets[chain(node.value.func)]]
            for target in node.targets:
                if isinstance(target, ast.Name) and positions[0] < 0:
                    out.setdefault(path, set()).add(target.id)
                elif isinstance(target, ast.Tuple):
                    out.setdefault(path, set()).update(
                        e.id for i, e in enumerate(target.elts) if isinstance(e, ast.Name) and (i in positions or positions == (-2,))
                    )
    return out


def _kept_iterators(cls: ast.ClassDef, imports: dict[str, str]) -> set[str]:
    """Attributes a class keeps a library's batch iterator in (BiDAF's SQuAD:
    `self.train_iter = data.BucketIterator(...)`), and in nothing else."""
    made, other = set(), set()
    for node in ast.walk(cls):
        if not isinstance(node, ast.Assign):
            continue
        library = isinstance(node.value, ast.Call) and library_batch_iterator(qualify(node.value.func, imports))
        for target in node.targets:
            for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(element, ast.Attribute) and isinstance(element.value, ast.Name) and element.value.id == "self":
                    (made if library else other).add(element.attr)
    return made - other


def _iterator_positions(function: ast.FunctionDef, imports: dict[str, str]) -> tuple[int, ...]:
    """Where every `return` of the function hands out a library's batch iterator: places
    of the returned tuple, (-1,) the value itself, (-2,) a tuple of them (`return
    BucketIterator.splits(...)`); () when the returns disagree or hand out none."""
    def made(value: ast.AST | None) -> bool:
        return isinstance(value, ast.Call) and library_batch_iterator(qualify(value.func, imports))

    built = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and made(node.value):
            for target in node.targets:
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                built |= {e.id for e in elements if isinstance(e, ast.Name)}
    found: set[tuple[int, ...]] = set()
    for node in _own_nodes(function):
        if isinstance(node, ast.Return):
            value = node.value
            if isinstance(value, ast.Tuple):
                found.add(tuple(i for i, e in enumerate(value.elts) if made(e) or isinstance(e, ast.Name) and e.id in built))
            elif made(value):
                found.add((-2,) if qualify(value.func, imports).endswith(".splits") else (-1,))  # type: ignore[union-attr]
            else:
                found.add((-1,) if isinstance(value, ast.Name) and value.id in built else ())
    return found.pop() if len(found) == 1 else ()


def _own_nodes(function: ast.FunctionDef):
    """The nodes of the function's body, not of the functions it defines (a tokenizer's `return`)."""
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    todo = [n for n in function.body if not isinstance(n, nested)]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, nested))


# what a plain list is made by
_LIST_MAKERS = {"list", "sorted", "range", "tuple"}


def _plain_lists_of_handed_objects(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, set[str]]:
    """ClusterGCN's trainer keeps the `ClusteringMachine` main.py hands it
    (`self.clustering_machine`) and trains in a loop over `self.clustering_machine.clusters`,
    which that class binds only to lists (`[c for c in range(n)]`, `list(set(parts))`): no
    DataLoader, so nothing splits what the loop trains on (AM218 says so). For each file: the
    `name.attribute` chains it reads on objects of the run's classes whose class binds
    `self.attribute` to nothing but a list."""
    lists: dict[tuple[str, str], set[str]] = {}
    for path, tree, _ in trees_mentioning(sources, files, (b"self.",)):
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            bound: dict[str, list[ast.expr]] = {}
            for node in ast.walk(cls):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                            bound.setdefault(target.attr, []).append(node.value)
            plain = {attr for attr, values in bound.items() if all(_a_plain_list(v) for v in values)}
            if plain:
                lists[(path, cls.name)] = plain
    out: dict[str, set[str]] = {}
    for path, f in files.items() if lists else ():
        source = sources.get(path, b"")
        for name, made in instances_of(source, f, files).items():
            for attr in lists.get(made, ()):
                if f"{name}.{attr}".encode() in source:
                    out.setdefault(path, set()).add(f"{name}.{attr}")
    return out


def _a_plain_list(value: ast.expr) -> bool:
    if isinstance(value, (ast.List, ast.ListComp, ast.Tuple)):
        return True
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _LIST_MAKERS
