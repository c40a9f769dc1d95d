"""Training loops over an object of the run that keeps its DataLoader inside.

pytorch-CycleGAN-and-pix2pix's train.py loops `for i, data in enumerate(dataset)` over
`create_dataset(opt)`, a `CustomDatasetDataLoader` of data/__init__.py whose `__iter__`
yields the batches of `self.dataloader = torch.utils.data.DataLoader(...)`. prepare()
cannot take the wrapper, and the DataLoader inside is built where no Accelerator is: on N
processes each one trained on the whole set, and nothing said so, in either file (reader
R12, thirtieth session). Both ends are named now (AM218): the loop, and the DataLoader to
prepare where it is built.
"""

from __future__ import annotations

import ast
import os

from migrator.analysis.ast_imports import qualify
from migrator.project.drives import training_methods_of
from migrator.project.entries import instances_of
from migrator.project.index import FileIndex, chain, parsed, trees_mentioning

# calls a loop's iterable goes through to the object whose batches it draws
_THROUGH = {"enumerate", "iter", "tqdm", "tqdm.tqdm", "trange"}


def wrapped_loader_facts(
    sources: dict[str, bytes], files: dict[str, FileIndex], read_only: frozenset[str] = frozenset(),
) -> tuple[dict[str, tuple[tuple[str, str, str], ...]], dict[str, tuple[tuple[str, int, str, str], ...]]]:
    """(for each file defining such a class: (class, the attribute holding the DataLoader,
    where a training loop of another file iterates it); for each file holding such a loop:
    (the name iterated, the loop's line, the class, where its DataLoader is built)). Loops
    of the files the run only reads (`read_only`: a test script beside train.py) do not count."""
    wrappers = _wrappers(sources, files)
    held: dict[str, set[tuple[str, str, str]]] = {}
    loops: dict[str, set[tuple[str, int, str, str]]] = {}
    if not wrappers:
        return {}, {}
    for path, f in files.items():
        if path in read_only:
            continue
        bound = _bound_to_wrappers(sources.get(path, b""), f, files, wrappers)
        tree = parsed(sources.get(path, b"")) if bound else None
        if tree is None:
            continue
        spellings, receivers = _training_calls(sources, path, tree, f, files)
        for loop in (n for n in ast.walk(tree) if isinstance(n, ast.For)):
            name = _iterated(loop.iter)
            target = bound.get(name or "")
            if target is None or target[0] == path or not _trains(loop, spellings, receivers):
                continue
            attr, line = wrappers[target]
            here = os.path.relpath(path, os.path.dirname(target[0]) or ".").replace(os.sep, "/")
            there = os.path.relpath(target[0], os.path.dirname(path) or ".").replace(os.sep, "/")
            held.setdefault(target[0], set()).add((target[1], attr, f"{here}:{loop.lineno}"))
            loops.setdefault(path, set()).add((name, loop.lineno, target[1], f"{there}:{line}"))
    return (
        {path: tuple(sorted(found)) for path, found in held.items()},
        {path: tuple(sorted(found)) for path, found in loops.items()},
    )


def _wrappers(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[tuple[str, str], tuple[str, int]]:
    """(file, class) → (attribute, line of its DataLoader) for the run's classes whose
    `__iter__` iterates a DataLoader they keep (`self.dataloader = DataLoader(...)`), not
    one a DistributedSampler already shards."""
    out = {}
    for path, tree, imports in trees_mentioning(sources, files, (b"__iter__",)):
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            iterate = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__iter__"), None)
            if iterate is None:
                continue
            iterated = {_self_attribute(_inner(n.iter)) for n in ast.walk(iterate) if isinstance(n, ast.For)}
            iterated |= {_self_attribute(_inner(n.value)) for n in ast.walk(iterate) if isinstance(n, (ast.YieldFrom, ast.Return)) and n.value}
            kept = _kept_loaders(cls, imports)
            found = [(attr, kept[attr]) for attr in sorted(iterated - {None}) if attr in kept]
            if len(found) == 1:
                out[(path, cls.name)] = found[0]
    return out


def _kept_loaders(cls: ast.ClassDef, imports: dict[str, str]) -> dict[str, int]:
    """Attributes the class binds to a DataLoader it builds (and to nothing else): → line."""
    made: dict[str, int] = {}
    other: set[str] = set()
    for node in ast.walk(cls):
        if not isinstance(node, ast.Assign):
            continue
        value = node.value
        loader = isinstance(value, ast.Call) and qualify(value.func, imports).rsplit(".", 1)[-1] == "DataLoader" and not _sharded(value)
        for target in node.targets:
            attr = _self_attribute(target)
            if attr is not None and loader:
                made.setdefault(attr, value.lineno)
            elif attr is not None:
                other.add(attr)
    return {attr: line for attr, line in made.items() if attr not in other}


def _sharded(call: ast.Call) -> bool:
    """Built with a DistributedSampler: each process reads its share already."""
    return any(k.arg in ("sampler", "batch_sampler") and "Distributed" in ast.unparse(k.value) for k in call.keywords)


def _bound_to_wrappers(source: bytes, f: FileIndex, files: dict[str, FileIndex], wrappers) -> dict[str, tuple[str, str]]:
    """Names this file binds to an instance of one of those classes: built here, or handed
    back by a function of the run that makes one (Function.makes: `create_dataset(opt)`)."""
    made = {c.spelling: makes[0] for c in f.calls if len(makes := _wrappers_made(files, c.target, wrappers)) == 1}
    bound = {name: target for name, target in instances_of(source, f, files).items() if target in wrappers} if source else {}
    tree = parsed(source) if made else None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and chain(node.value.func) in made:
            bound.update({t.id: made[chain(node.value.func)] for t in node.targets if isinstance(t, ast.Name)})
    return bound


def _wrappers_made(files: dict[str, FileIndex], target: tuple[str, str], wrappers) -> list[tuple[str, str]]:
    function = _function(files, target)
    return [m for m in function.makes if m in wrappers] if function is not None else []


def _training_calls(
    sources: dict[str, bytes], path: str, tree: ast.Module, f: FileIndex, files: dict[str, FileIndex],
) -> tuple[set[str], dict[str, set[str]]]:
    """This file's calls of the run's functions that update a model (spellings), and the
    names it binds to the run's objects that train, with their methods that run a backward
    (`model = create_model(opt)`, then `model.optimize_parameters()`)."""
    spellings = {c.spelling for c in f.calls if (fn := _function(files, c.target)) is not None and not fn.is_class and fn.updates}
    classes = {name: [target] for name, target in instances_of(sources.get(path, b""), f, files).items()}
    factories = {c.spelling: _function(files, c.target) for c in f.calls}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and (fn := factories.get(chain(node.value.func) or "")):
            classes.update({t.id: list(fn.makes) for t in node.targets if isinstance(t, ast.Name) and fn.makes})
    receivers = {
        name: set().union(*(training_methods_of(sources, *c) for c in made if _trains_itself(files, c)))
        for name, made in classes.items()
    }
    return spellings, {name: methods for name, methods in receivers.items() if methods}


def _function(files: dict[str, FileIndex], target: tuple[str, str]):
    owner = files.get(target[0])
    return owner.functions.get(target[1]) if owner is not None else None


def _trains_itself(files: dict[str, FileIndex], target: tuple[str, str]) -> bool:
    """A class of the run with a `.backward()` or `.step()` in a method."""
    function = _function(files, target)
    return function is not None and function.is_class and function.updates


def _trains(loop: ast.For, spellings: set[str], receivers: dict[str, set[str]]) -> bool:
    """The loop's body calls a backward, or one of the file's calls that train."""
    for node in ast.walk(loop):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        spelling = chain(func) or ""
        if spelling.endswith(".backward") or spelling in spellings:
            return True
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr in receivers.get(func.value.id, ()):
            return True
    return False


def _iterated(expr: ast.expr) -> str | None:
    inner = _inner(expr)
    return inner.id if isinstance(inner, ast.Name) else None


def _inner(expr: ast.expr) -> ast.expr:
    """`loader` of `enumerate(loader)`, `tqdm(enumerate(loader))`, `iter(loader)`."""
    while isinstance(expr, ast.Call) and chain(expr.func) in _THROUGH and expr.args:
        expr = expr.args[0]
    return expr


def _self_attribute(expr: ast.expr) -> str | None:
    return expr.attr if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self" else None
