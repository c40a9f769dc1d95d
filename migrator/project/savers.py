"""Methods of the run's model objects that write a checkpoint with `torch.save`.

pix2pixHD's train.py ends an epoch with `model.module.save('latest')`: the model
`create_model(opt)` returns is a Pix2PixHDModel, whose `save` hands each network to
`BaseModel.save_network` (models/base_model.py), which torch.saves it. Run by every
process, N processes write each file at once. The method is not a helper that only writes
(project/writers.py: it moves the network too), so the call is named, left as written
(`Config.project_savers`, reported by AM517): where the script gets an Accelerator it
goes under `if accelerator.is_main_process:`, by hand. Read with `ast`, through `self.`
calls to the class's own methods and those of its bases in the run.
"""

from __future__ import annotations

import ast
import os

from migrator.project.dir_makers import guarded_walk
from migrator.project.drives import Trees
from migrator.project.entries import instances_of
from migrator.project.index import FileIndex, torch_saves

Method = tuple[str, str, str]  # (file, class, method)


def saver_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, str, str], ...]]:
    """For each file of the run: its calls of a checkpoint-writing method on an instance of
    the run's classes (`model.save(epoch)`, `model.module.save(...)` on what a factory
    returns), as (spelling, where the save is, from the caller's folder, the call that made
    the instance: a class the run gives the Accelerator saves once itself). A method that
    also trains (`trainer.train()` saving each epoch) is its class's business, not its
    caller's: the caller cannot run it on one process."""
    trees = Trees(sources)  # each file parsed once, for its classes and for its calls
    classes = _classes(trees, sources, files)
    if not classes:
        return {}
    methods = {
        (*cls, s.name): s for cls, node in classes.items() for s in node.body if isinstance(s, ast.FunctionDef)
    }
    saving = _closure(classes, files, methods, torch_saves)
    if not saving:
        return {}
    training = _closure(classes, files, methods, _trains)
    out: dict[str, set[tuple[str, str, str]]] = {}
    for path, f in files.items():
        tree = trees[path]
        instances = _instances(sources.get(path, b""), tree, f, files) if tree is not None else {}
        if not instances:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            receiver, method = node.func.value, node.func.attr
            if isinstance(receiver, ast.Attribute) and receiver.attr == "module":
                receiver = receiver.value  # `model.module.save(...)`: the DataParallel-wrapped object
            if not isinstance(receiver, ast.Name) or receiver.id not in instances:
                continue
            made_by, kinds = instances[receiver.id]
            for made in kinds:
                found = _resolve(classes, files, made, method, saving)
                if found is not None and not _trains_for(classes, files, methods, made, method, training):
                    where, line, via = saving[found]
                    shown = os.path.relpath(where, os.path.dirname(path) or ".").replace(os.sep, "/")
                    through = f", through `{via}`" if via != method else ""
                    out.setdefault(path, set()).add((ast.unparse(node.func), f"`torch.save` ({shown}:{line}{through})", made_by))
                    break
    return {path: tuple(sorted(calls)) for path, calls in out.items()}


def _trains(node: ast.AST) -> bool:
    """`loss.backward()` or `optimizer.step()`."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("backward", "step")


def _classes(trees: Trees, sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[tuple[str, str], ast.ClassDef]:
    out = {}
    for path in files:
        tree = trees[path] if b"class " in sources.get(path, b"") else None
        if tree is not None:
            out.update({(path, n.name): n for n in tree.body if isinstance(n, ast.ClassDef)})
    return out


def _bases(classes: dict[tuple[str, str], ast.ClassDef], files: dict[str, FileIndex], owner: tuple[str, str]) -> list[tuple[str, str]]:
    """The class and its bases in the run, nearest first (same file by name, other files
    through FileIndex.bases)."""
    order, todo = [], [owner]
    while todo and len(order) < 12:
        current = todo.pop(0)
        if current in order or current not in classes:
            continue
        order.append(current)
        here = [(current[0], b.id) for b in classes[current].bases if isinstance(b, ast.Name)]
        todo += [b for b in here if b in classes] + sorted(files[current[0]].bases.get(current[1], ()))
    return order


def _trains_for(classes, files, methods: dict[Method, ast.FunctionDef], made: tuple[str, str], method: str, training) -> bool:
    """`made.method` trains: itself, or through a `self.` call the instance's own class
    answers (pytorch-template's `BaseTrainer.train` calls `self._train_epoch(epoch)`,
    abstract there, which the `Trainer` subclass of another file overrides with the
    backward: `trainer.train()` is the training, not a checkpoint method, reader R3)."""
    if _resolve(classes, files, made, method, training) is not None:
        return True
    defined = next(((*cls, method) for cls in _bases(classes, files, made) if (*cls, method) in methods), None)
    if defined is None:
        return False
    for node, _ in guarded_walk(methods[defined], False):
        func = node.func if isinstance(node, ast.Call) else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            if _resolve(classes, files, made, func.attr, training) is not None:
                return True
    return False


def _resolve(classes, files, owner: tuple[str, str], method: str, saving: dict[Method, tuple]) -> Method | None:
    """The definition `owner.method` runs (its own, or a base's), when it saves."""
    for cls in _bases(classes, files, owner):
        if any(isinstance(s, ast.FunctionDef) and s.name == method for s in classes[cls].body):
            key = (*cls, method)
            return key if key in saving else None
    return None


def _closure(classes, files, methods: dict[Method, ast.FunctionDef], does) -> dict[Method, tuple[str, int, str]]:
    """(file, class, method) → (file, line, the method holding it) of the first node that
    `does` (a torch.save, a backward) on every call (not under a test of the rank), in the
    method or through `self.other(...)`."""
    found: dict[Method, tuple[str, int, str]] = {}
    for key, method in methods.items():
        hit = next((n for n, guarded in guarded_walk(method, False) if not guarded and does(n)), None)
        if hit is not None:
            found[key] = (key[0], hit.lineno, key[2])
    for _ in range(3):
        for key, method in methods.items():
            if key in found:
                continue
            for node, guarded in guarded_walk(method, False):
                func = node.func if isinstance(node, ast.Call) and not guarded else None
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
                    reached = _resolve(classes, files, key[:2], func.attr, found)
                    if reached is not None and reached != key:
                        found[key] = found[reached]
                        break
    return found


def _instances(source: bytes, tree: ast.Module, f: FileIndex, files: dict[str, FileIndex]) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Names bound to instances of the run's classes, with the call that made them:
    `solver = Solver(...)`, and `model = create_model(opt)` for each class the factory may
    return."""

    def made(target: tuple[str, str]) -> list[tuple[str, str]]:
        function = files[target[0]].functions.get(target[1]) if target[0] in files else None
        return list(function.makes) if function is not None and function.makes else [target]

    spellings = {c.target: c.spelling for c in sorted(f.calls, key=lambda c: c.spelling)}
    bound = {**f.instances, **instances_of(source, f, files)}  # the index's `x = f(...)`, `x = Cls(...).cuda()`, a list's items
    factories = {c.spelling: c.target for c in f.calls if made(c.target) != [c.target]}
    if factories:  # `model = create_model(opt)`, bound again later (`model, opt = amp.initialize(model, ...)`)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                called = ast.unparse(node.value.func) if isinstance(node.value, ast.Call) else ""
                if called in factories:
                    bound.setdefault(node.targets[0].id, factories[called])
    return {name: (spellings.get(target, ""), made(target)) for name, target in bound.items() if target is not None}
