"""The calls by which a file drives training that lives in another file of the run.

chenyuntc's train.py draws batches and calls `trainer.train_step(img, bbox, label, scale)`
on a `FasterRCNNTrainer` of trainer.py, whose methods run the backward and the step. The
file itself calls no backward, so the safety net of verify/silence.py never looked at it,
and alone (the pre-commit hook's case) it passed with no finding. These calls let the
engine name the file (AM916) when nothing else did.
"""

from __future__ import annotations

import ast

from migrator.project.entries import instances_of
from migrator.project.index import FileIndex, chain


def driving_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, int, int, str, str], ...]]:
    """For each file: its calls of functions, classes or instances' methods of other files
    of the run that train (a `.backward()` or `.step()` in them), and of other files'
    functions that call a training method of an instance the call hands them (LightGCN's
    `Procedure.BPR_train_original(dataset, model, bpr)`, calling `bpr.stageOne(...)`: named
    by the instance's method, where the training is), and
    of methods a subclass of another file defines to train (`self._train_epoch(epoch)` in a
    base class's epoch loop), as (spelling, line, column,
    the other file, the function or class), in the order of the file."""
    out = {}
    methods_of: dict[tuple[str, str], set[str]] = {}  # each class of the run parsed once
    trees = Trees(sources)

    def training_methods(target: tuple[str, str]) -> set[str]:
        if target not in methods_of:
            methods_of[target] = training_methods_of(sources, *target)
        return methods_of[target]

    for path, f in files.items():
        others = {c.spelling: c.target for c in f.calls if c.target[0] != path}
        trains = {s: t for s, t in others.items() if _trains(files, t)}
        instances = {name: target for name, target in instances_of(sources.get(path, b""), f, files).items() if target[0] != path}
        subclasses = {
            (other, name): fn.inherits[1] for other, g in files.items() if other != path
            for name, fn in g.functions.items() if fn.inherits is not None and fn.inherits[0] == path
        }
        factories = {s: (t, made) for s, t in others.items() if (made := _makes(files, t))}
        if not trains and not instances and not subclasses and not factories:
            continue
        try:
            tree = ast.parse(sources[path])
        except (SyntaxError, ValueError):
            continue
        instances_of_factories = _made_by_factories(tree, factories)
        found, methods = [], set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            spelling = chain(node.func)
            target = trains.get(spelling or "")
            if target is None and spelling in others:
                # `train(dataset, model, bpr)` calling `bpr.stageOne(...)` in there: the training is bpr's class's
                target = _trained_through(node, others[spelling], instances, training_methods, trees)
            receiver = _unwrapped(node.func.value) if isinstance(node.func, ast.Attribute) else None
            if target is None and receiver is not None:
                made = instances.get(receiver)
                trains_here = made is not None and node.func.attr in training_methods(made)
                target = made if trains_here else None
                if target is None:  # `model = get_model(opts)`: one of the classes the factory returns
                    factory, kinds = instances_of_factories.get(receiver, (None, ()))
                    trained = [k for k in kinds if node.func.attr in training_methods(k)]
                    # several may: the factory is named (`get_model()`, whose classes' findings say more)
                    target = trained[0] if len(trained) == 1 else factory if trained else None
                methods |= {target} if target is not None else set()
            if target is not None:
                found.append((spelling, node.lineno, node.col_offset + 1, target[0], target[1]))
        found += _inherited_steps(tree, subclasses, training_methods)
        # `trainer = FasterRCNNTrainer(model)`, then `trainer.train_step(...)`: the method is what trains
        found = [c for c in found if (c[3], c[4]) not in methods or c[0].rpartition(".")[2] != c[4]]
        if found:
            out[path] = tuple(sorted(found, key=lambda c: (c[1], c[2])))
    return out


def _unwrapped(receiver: ast.AST) -> str | None:
    """`model` for `model` and for `model.module` (the object a DataParallel wrap holds)."""
    if isinstance(receiver, ast.Attribute) and receiver.attr == "module":
        receiver = receiver.value
    return receiver.id if isinstance(receiver, ast.Name) else None


def _makes(files: dict[str, FileIndex], target: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    owner = files.get(target[0])
    function = owner.functions.get(target[1]) if owner is not None else None
    return function.makes if function is not None else ()


def _made_by_factories(tree: ast.Module, factories: dict) -> dict[str, tuple[tuple[str, str], tuple[tuple[str, str], ...]]]:
    """Names bound to what another file's factory returns (`model = get_model(opts)`):
    name → ((the factory's file, `get_model()`), the classes it may be (Function.makes))."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call):
            spelling = chain(node.value.func) or ""
            if spelling in factories:
                target, made = factories[spelling]
                out[node.targets[0].id] = ((target[0], f"{target[1]}()"), made)
    return out


def _inherited_steps(tree: ast.Module, subclasses: dict[tuple[str, str], str], training_methods) -> list[tuple]:
    """`self._train_epoch(epoch)` in the epoch loop of a base class whose subclass of
    another file trains in `_train_epoch` (pytorch-template's BaseTrainer.train() and
    trainer/trainer.py's Trainer): the base class drives that training."""
    found = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        heirs = [sub for sub, base in subclasses.items() if base == cls.name]
        for node in ast.walk(cls):
            func = node.func if isinstance(node, ast.Call) else None
            if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"):
                continue
            heir = next((sub for sub in heirs if func.attr in training_methods(sub)), None)
            if heir is not None:
                found.append((f"self.{func.attr}", node.lineno, node.col_offset + 1, heir[0], heir[1]))
    return found


class Trees(dict):
    """The run's files parsed on first use (None: not Python 3)."""

    def __init__(self, sources: dict[str, bytes]) -> None:
        super().__init__()
        self._sources = sources

    def __missing__(self, path: str) -> ast.Module | None:
        try:
            tree = ast.parse(self._sources.get(path, b""))
        except (SyntaxError, ValueError):
            tree = None
        self[path] = tree
        return tree


def _trained_through(call: ast.Call, callee: tuple[str, str], instances, training_methods, trees) -> tuple[str, str] | None:
    """The class whose training method the function `callee` of another file calls on an
    instance this call hands it (`Procedure.BPR_train_original(dataset, model, bpr)`,
    whose body calls `bpr.stageOne(...)`, a method of utils.BPRLoss that steps); None when
    the function only reads it (`write_loss(iterations, trainer, writer)` logging its losses)."""
    tree = trees[callee[0]]
    function = next(
        (n for n in (tree.body if tree is not None else ()) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == callee[1]),
        None,
    )
    if function is None:
        return None
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    handed = [(params[i] if i < len(params) else None, a) for i, a in enumerate(call.args)]
    handed += [(k.arg, k.value) for k in call.keywords]
    for param, value in handed:
        made = instances.get(value.id) if isinstance(value, ast.Name) and param else None
        if made is None:
            continue
        called = {
            n.func.attr for n in ast.walk(function) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name) and n.func.value.id in _aliases(function, param)
        }
        trained = sorted(called & training_methods(made))
        if trained:  # named by the method: the class itself may create the Accelerator (Config.project_enters)
            return made[0], f"{made[1]}.{trained[0]}"
    return None


def _aliases(function: ast.AST, param: str) -> set[str]:
    """`param`, and names bound to it in the function (`bpr: utils.BPRLoss = loss_class`)."""
    names = {param}
    for n in ast.walk(function):
        value = n.value if isinstance(n, (ast.Assign, ast.AnnAssign)) else None
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        if isinstance(value, ast.Name) and value.id in names:
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def training_methods_of(sources: dict[str, bytes], path: str, name: str) -> set[str]:
    """The methods of class `name` of `path` that call `.backward()` (or, in a class that
    takes none, `.step()`), in their body or through other methods of the class
    (`self.train_step(...)`)."""
    try:
        tree = ast.parse(sources.get(path, b""))
    except (SyntaxError, ValueError):
        return set()
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if cls is None:
        return set()
    bodies = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    calls = {
        m: {c.func for c in ast.walk(body) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)}
        for m, body in bodies.items()
    }
    def closure(found: set[str]) -> set[str]:
        changed = True
        while changed:
            more = {
                m for m, funcs in calls.items() if m not in found and any(
                    isinstance(f.value, ast.Name) and f.value.id == "self" and f.attr in found for f in funcs
                )
            }
            found |= more
            changed = bool(more)
        return found

    # the methods that take a backward when there are any (MUNIT's `dis_update`), not one that
    # only steps the schedulers (`update_learning_rate`): the one a finding names
    backward = closure({m for m, funcs in calls.items() if any(f.attr == "backward" for f in funcs)})
    return backward or closure({m for m, funcs in calls.items() if any(f.attr == "step" for f in funcs)})


def _trains(files: dict[str, FileIndex], target: tuple[str, str]) -> bool:
    owner = files.get(target[0])
    function = owner.functions.get(target[1]) if owner is not None else None
    return function is not None and function.updates
