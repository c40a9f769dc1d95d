"""Names of a file that other files of the run call once per process.

RAM's `trainer.py` builds its model and optimizer in `Trainer.__init__`; `main.py` runs
`Trainer(config, loaders)` once. Alone, trainer.py's migration creates the Accelerator in
a class nothing in the file calls, and the verifier leaves it as written (AM954: whether
it runs once per process cannot be seen). With main.py in the run it can: the file is
migrated with `Config.project_entered` naming the classes and functions that another
file calls outside any loop, from a function that file does not hand on as a value (a
worker `torch.multiprocessing` starts is such a value).
"""

from __future__ import annotations

import ast

from migrator.project.calls import spelling_of
from migrator.project.handed_instances import handed_instance_methods
from migrator.project.index import ACCELERATOR, FileIndex, collection_items

_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)


def entered_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file of the run: its top-level names that another file calls once per process."""
    out: dict[str, set[str]] = {}
    for path, f in files.items():
        calls = [c for c in f.calls if c.target[0] != path and c.target[0] in files]
        if not calls:
            continue
        try:
            tree = ast.parse(sources[path])
        except (SyntaxError, ValueError):
            continue
        if _sets_up(tree):
            continue  # its own set-up: what it hands over is its to prepare (the threading of decide.py)
        once = _called_once(tree)
        for c in calls:
            if c.spelling in once:
                out.setdefault(c.target[0], set()).add(c.target[1])
    return {path: tuple(sorted(names)) for path, names in out.items()}


def entering_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file of the run that enters such a function or class that trains (it will
    create the Accelerator itself): those calls as spelled there (Config.project_enters).
    What the file does before them runs on every process without an Accelerator."""
    entered = entered_calls(sources, files)
    builders = {path: _builders(sources[path], names) for path, names in entered.items()}
    out = {}
    for path, f in files.items():
        calls = {c.spelling for c in f.calls if c.target[1] in builders.get(c.target[0], ())}
        if calls:
            out[path] = tuple(sorted(calls))
    return out


def launched(sources: dict[str, bytes], files: dict[str, FileIndex], among: frozenset[str]) -> set[str]:
    """Those of `among` (files the run only reads) that are part of the program the
    launcher runs: they set up training (an optimizer, a model's parameters, an
    Accelerator), pass the Accelerator, or call a function or class of the project that
    trains, or runs a backward itself (pix2pixHD's train.py, whose optimizers come from the
    model). A script that only starts runs or edits their settings (a hyper-parameter
    search) is not: the helpers it calls do not run once per process for it."""
    out = set()
    for path in among:
        f = files.get(path)
        if f is None:
            continue
        trains = any(
            (fn := files[c.target[0]].functions.get(c.target[1])) is not None and fn.updates
            for c in f.calls if c.target[0] in files
        )
        if trains or any(k == ACCELERATOR for c in f.calls for k, _ in c.keywords):
            out.add(path)
            continue
        try:
            tree = ast.parse(sources[path])
        except (SyntaxError, ValueError):
            continue
        if _sets_up(tree) or _backward_by_hand(tree):
            out.add(path)
    return out


def _backward_by_hand(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward" for n in ast.walk(tree))


def _builders(source: bytes, names: tuple[str, ...]) -> set[str]:
    """Those of `names` whose definition builds an optimizer (or prepares) itself."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    return {n.name for n in tree.body if getattr(n, "name", None) in names and _sets_up(n)}


def _called_once(tree: ast.Module) -> set[str]:
    """Spellings of the calls made outside loops, in the module's body or in a function it
    does not pass around as a value. A spelling also called inside a loop is left out."""
    handed_on = _passed_as_values(tree)
    once: set[str] = set()
    repeated: set[str] = set()

    def visit(node: ast.AST, in_loop: bool, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call):
                spelling = spelling_of(child.func)
                if spelling is not None:
                    (repeated if in_loop or function in handed_on else once).add(spelling)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, False, child.name if function is None else function)
            else:
                visit(child, in_loop or isinstance(child, _LOOPS), function)

    visit(tree, False, None)
    return once - repeated


def _sets_up(tree: ast.AST) -> bool:
    """The code builds an optimizer, reads a model's parameters for one or has an
    Accelerator. Parameters read to clip their gradients (Bert-Multi-Label's Trainer,
    handed its optimizer) build nothing."""
    clipped = {
        id(a) for n in ast.walk(tree) if isinstance(n, ast.Call) and _name_of(n).startswith("clip_grad") for a in n.args
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            spelling = spelling_of(node.func) or (node.func.attr if isinstance(node.func, ast.Attribute) else "")
            name = spelling.rsplit(".", 1)[-1]
            if "optim." in f"{spelling}." and name[:1].isupper() or name in {"Accelerator", "prepare"}:
                return True
            if name in {"parameters", "named_parameters"} and id(node) not in clipped:
                return True
    return False


def _name_of(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _passed_as_values(tree: ast.Module) -> set[str]:
    """Names handed to a call as arguments (`mp.spawn(worker, ...)`, `Thread(target=run)`)."""
    return {
        a.id for n in ast.walk(tree) if isinstance(n, ast.Call)
        for a in [*n.args, *(k.value for k in n.keywords)] if isinstance(a, ast.Name)
    }


def called_elsewhere(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file of the run: its top-level names that another file of the run calls.
    Alone, a file sees only its own calls of them: what it hands them there (a loader it
    never prepares) need not be what the other files hand them."""
    out: dict[str, set[str]] = {}
    for path, f in files.items():
        for c in f.calls:  # a call only the main process makes does not run the code on every process
            if c.target[0] != path and c.target[0] in files and not c.main_only:
                out.setdefault(c.target[0], set()).add(c.target[1])
        source = sources.get(path, b"")
        handed = handed_instance_methods(sources, path, f, files, instances_of(source, f, files)) if source else set()
        for target, method in _instance_methods(source, f, files) | handed:
            if target[0] != path and target[0] in files:
                out.setdefault(target[0], set()).add(f"{target[1]}.{method}")
        for owner, method in f.class_calls:  # `ConfigParser.from_args(args)`, a classmethod
            if owner != path and owner in files:
                out.setdefault(owner, set()).add(method)
        for owner, name in f.handed:  # BigGAN's `functools.partial(utils.sample, ...)`, called through the partial
            if owner != path and owner in files:
                out.setdefault(owner, set()).add(name)
    return {path: tuple(sorted(names)) for path, names in out.items()}


def instances_of(source: bytes, f: FileIndex, files: dict[str, FileIndex]) -> dict[str, tuple[str, str]]:
    """Names this file binds to instances of the run's classes (`solver = Solver(...)`,
    `trainer = Trainer(model).cuda()`): name → (path, class)."""
    instances = {**_handed_attributes(f, files), **_inherited_attributes(f, files), **f.instances}
    made = {c.spelling: c.target for c in f.calls if _is_class(files, c.target)}
    if not made:
        return instances
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return instances
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            built = [made[s] for n in ast.walk(node.value) if isinstance(n, ast.Call) and (s := spelling_of(n.func)) in made]
            if built:
                instances.setdefault(node.targets[0].id, built[0])
    instances.update(_listed_instances(tree, made, instances))
    return instances


def _listed_instances(tree: ast.Module, classes: dict[str, tuple[str, str]], bound: dict) -> dict[str, tuple[str, str]]:
    """Loop variables over a list or tuple of instances of one class of the run
    (stargan-v2's `self.ckptios = [CheckpointIO(...), CheckpointIO(...)]`, then `for
    ckptio in self.ckptios: ckptio.save(step)`): name → the class."""
    collections: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, (ast.List, ast.Tuple)) and node.value.elts:
            made = {classes.get(ast.unparse(e.func)) if isinstance(e, ast.Call) else None for e in node.value.elts}
            if len(made) == 1 and None not in made:
                collections[ast.unparse(node.targets[0])] = made.pop()
    return {name: collections[source] for name, source in collection_items(tree).items() if source in collections and name not in bound}


def _inherited_attributes(f: FileIndex, files: dict[str, FileIndex]) -> dict[str, tuple[str, str]]:
    """`self.io` of a class built on a class of another file that binds it there
    (st-gcn's Processor, whose base IO sets `self.io = torchlight.IO(...)`)."""
    out: dict[str, tuple[str, str]] = {}
    for base_file, _ in sorted({b for bases in f.bases.values() for b in bases}):
        base = files.get(base_file)
        if base is not None:
            out.update({name: made for name, made in base.instances.items() if name.startswith("self.")})
    return out


def _handed_attributes(f: FileIndex, files: dict[str, FileIndex]) -> dict[str, tuple[str, str]]:
    """`self.model_checkpoint` of a class whose `__init__` keeps the parameter as it is,
    where every call of the class in the run hands it an instance of one class of the run
    (Bert-Multi-Label's `Trainer(..., model_checkpoint=model_checkpoint)` after
    `model_checkpoint = ModelCheckpoint(...)` in run_bert.py)."""
    handed: dict[str, set[tuple[str, str] | None]] = {}
    for name, function in f.functions.items():
        if not function.is_class or not function.kept_params:
            continue
        for other in files.values():
            for call in other.calls:
                if call.target != (f.path, name) or call.has_star:
                    continue
                keywords = dict(call.keywords)
                for param, attribute in function.kept_params:
                    position = function.params.index(param)
                    given = keywords.get(param) if param in keywords else call.args[position] if position < len(call.args) else None
                    if given is not None or param in keywords or position < len(call.args):
                        handed.setdefault(attribute, set()).add(other.instances.get(given) if given else None)
    return {attribute: made.pop() for attribute, made in handed.items() if len(made) == 1 and None not in made}


def _instance_methods(source: bytes, f: FileIndex, files: dict[str, FileIndex]) -> set[tuple[tuple[str, str], str]]:
    """The methods this file calls on instances of the run's classes (`solver = Solver(...)`,
    `trainer = Trainer(model).cuda()`, then `solver.train()`), or on one it has just built
    (pytorch-seq2seq's `Checkpoint(model=model, ...).save(self.expt_dir)`): ((path, class), method)."""
    found = {(target, method) for _, target, method in instance_method_calls(source, f, files)}
    made = {c.spelling: c.target for c in f.calls if _is_class(files, c.target)}
    if made:
        for node in ast.walk(ast.parse(source)):
            func = node.func if isinstance(node, ast.Call) else None
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
                target = made.get(spelling_of(func.value.func) or "")
                if target is not None:
                    found.add((target, func.attr))
    return found


def instance_method_calls(source: bytes, f: FileIndex, files: dict[str, FileIndex]) -> set[tuple[str, tuple[str, str], str]]:
    """Each `name.method(...)` this file calls on an instance of the run's classes, and
    `name(...)` (its `__call__`: `early_stopping(loss, model)`): (name, (path, class), method).
    A name bound to instances of several classes (FileIndex.picked) calls the method of each
    class that defines it."""
    instances = instances_of(source, f, files)
    if not instances and not f.picked:
        return set()
    tree = ast.parse(source)
    found = set()
    for node in ast.walk(tree):
        func = node.func if isinstance(node, ast.Call) else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in f.picked:
            found |= {(func.value.id, made, func.attr) for made in f.picked[func.value.id] if _defines(files, made, func.attr)}
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in instances:
            found.add((func.value.id, instances[func.value.id], func.attr))
        elif isinstance(func, ast.Attribute) and (held := _self_attribute(func.value)) in instances:
            found.add((held, instances[held], func.attr))  # `self.io.save_arg(...)`
        elif isinstance(func, ast.Name) and func.id in instances:
            found.add((func.id, instances[func.id], "__call__"))
    return found


def _defines(files: dict[str, FileIndex], target: tuple[str, str], method: str) -> bool:
    owner = files.get(target[0])
    function = owner.functions.get(target[1]) if owner is not None else None
    return function is not None and function.is_class and any(name == method for name, _ in function.methods)


def _is_class(files: dict[str, FileIndex], target: tuple[str, str]) -> bool:
    owner = files.get(target[0])
    function = owner.functions.get(target[1]) if owner is not None else None
    return function is not None and function.is_class


def _self_attribute(node: ast.expr) -> str | None:
    """`self.io` → "self.io"; anything else → None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None
