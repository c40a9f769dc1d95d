"""What each file of a run defines, imports from the others and calls there: read once
with `ast` (cheap, no LibCST), and which of its functions may be threaded."""

from __future__ import annotations

import ast
import functools
import os
import re
from typing import Callable
from dataclasses import dataclass, field

from migrator.analysis.ast_imports import module_imports

ACCELERATOR = "accelerator"


@dataclass
class Function:
    """A top-level function of a file: its parameters and whether it can be threaded."""

    name: str
    params: tuple[str, ...]  # positional-or-keyword, in order
    kwonly: tuple[str, ...]
    threadable: bool
    batch_stepped: frozenset[str] = frozenset()  # parameters it calls `.step()` on inside a loop
    is_class: bool = False  # a class: `params` are its __init__'s, the keyword goes there
    returned_loaders: tuple[int, ...] = ()  # positions of the returned tuple that are DataLoaders; (-1,): the value
    state_params: tuple[str, ...] = ()  # parameters whose state it saves or loads (`model.load_state_dict(...)`)
    updates: bool = True  # calls `.backward()` or `.step()` (a class: in any method): it trains, not only evaluates
    param_roles: tuple[tuple[str, str], ...] = ()  # (parameter, "model"|"optimizer"|"dataloader") by their use here (a class: of the attributes they are kept in)
    # A class: its methods that save or load the state of a model they are given,
    # directly or through another method (`EarlyStopping.__call__` → `self.save_checkpoint`):
    # (method, positions less self, parameters, whether the class writes it with torch.save).
    method_states: tuple[tuple[str, tuple[int, ...], tuple[str, ...], bool], ...] = ()
    state_writes: bool = False  # a function of state_params that writes a file with torch.save
    methods: tuple[tuple[str, tuple[str, ...]], ...] = ()  # a class: its other methods and their parameters less self
    # threadable but for the keyword-only `accelerator` it already takes: an earlier run
    # (or its author) threaded it, and the run is decided again as the first one was
    threaded_before: bool = False
    inherits: tuple[str, str] | None = None  # a class: (file, class) of a base class of another file of the project
    # adds up across processes itself (`dist.all_reduce(correct)`): handed the whole data on
    # every process, it would count it N times
    collective: bool = False
    # hands out a batch iterator of its own file that is no DataLoader (`return DatasetIterater(...)`,
    # or the class itself): prepare() cannot take what it returns
    batch_iterator: bool = False
    # parameters whose `.module` it reads (a class: kept as `self.model = model`, then `self.model.module`)
    module_params: tuple[str, ...] = ()
    # a function: the classes of the run whose instance it returns, (file, class) (`_note_factories`)
    makes: tuple[tuple[str, str], ...] = ()
    # a class: the parameters its `__init__` keeps as they are (`self.model_checkpoint = model_checkpoint`)
    kept_params: tuple[tuple[str, str], ...] = ()  # (parameter, "self.attribute")
    # parameters defaulting to False or None under whose truth alone it reads `.module`
    # (stargan-v2's `if self.data_parallel: module.module.state_dict()`): a call that
    # leaves them out never reads it
    module_flags: tuple[str, ...] = ()


@dataclass
class Call:
    """A call in one file to a function of another file of the run."""

    spelling: str  # the callee as written: `engine.train_fn`, `tf`
    target: tuple[str, str]  # (path of the defining file, function name)
    args: tuple[str | None, ...]  # positional arguments as names (None for other expressions)
    keywords: tuple[tuple[str, str | None], ...]
    has_star: bool
    main_only: bool = False  # under `if accelerator.is_main_process:`: only the main process calls it


@dataclass
class FileIndex:
    path: str
    functions: dict[str, Function] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    values: set[tuple[str, str]] = field(default_factory=set)  # run functions used as values here
    # ... of those, the ones handed to a call (`functools.partial(utils.sample, G=G)`, `mp.spawn(worker)`): run by it
    handed: set[tuple[str, str]] = field(default_factory=set)
    local_uses: set[str] = field(default_factory=set)  # names of own functions read in this file
    words: set[str] = field(default_factory=set)  # every identifier the file mentions
    instances: dict[str, tuple[str, str]] = field(default_factory=dict)  # `es = utils.EarlyStopping(...)`: es → the class
    bases: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # own class → (file, class) of other files it builds on
    class_calls: set[tuple[str, str]] = field(default_factory=set)  # (file, "Class.method") called on another file's class
    # `valid_dataset = eval('dataset.' + name)(...)`: valid_dataset → the classes module `dataset` holds;
    # `trainer = MUNIT_Trainer(c)` / `trainer = UNIT_Trainer(c)` in two branches: trainer → both
    picked: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)


_IMPORT_LINE = re.compile(rb"^[ \t]*(?:from[ \t]+\.*[\w.]*[ \t]+import|import[ \t])[^\n]*", re.MULTILINE)


def linked(sources: dict[str, bytes]) -> set[str]:
    """The files that may import another file of the run, and the files they may import:
    a textual look at import lines, cheap enough for every run (a run of 300 files that do
    not import each other parses none of them). Conservative: `import m`/`from m import ...`
    in a file links it to the run's `m.py` or package `m/` in its folder or a folder above
    (up to the run's root, where Python would look); a relative import links it to every
    file under the package it climbs to."""
    absolute = {p: os.path.abspath(p) for p in sources}
    root = run_root(absolute.values())
    tops: dict[tuple[str, bytes], set[str]] = {}  # (folder, first name of a module there) -> files
    for path, full in absolute.items():
        for folder in _folders(os.path.dirname(full), root):
            first = os.path.relpath(full, folder).split(os.sep)[0]
            tops.setdefault((folder, os.path.splitext(first)[0].encode()), set()).add(path)
    out: set[str] = set()
    for path, data in sources.items():
        for line in _IMPORT_LINE.findall(data):
            code = line.split(b"#", 1)[0].split()
            if code[0] == b"from" and code[1].startswith(b"."):
                hits = _under(path, len(code[1]) - len(code[1].lstrip(b".")), sources)
            else:  # an absolute import starts at its first name: `torch.utils.data` is not our data.py
                modules = [code[1]] if code[0] == b"from" else b" ".join(code[1:]).split(b",")
                names = {m.strip().split()[0] for m in modules if m.strip()}
                firsts = {m.split(b".")[0] for m in names}
                folders = _folders(os.path.dirname(absolute[path]), root)
                hits = {other for f in folders for word in firsts for other in tops.get((f, word), ()) if other != path}
                if not hits and _extends_path_text(path, data, sources, absolute):
                    hits = {other for m in names for other in _ending_with(m, absolute) if other != path}
            if hits:
                out |= hits | {path}
        for package in _PICKED_PACKAGE.findall(data):  # `import_module('models.' + name)`: any module there
            folders = _folders(os.path.dirname(absolute[path]), root)
            first = package.split(b".")[0]
            hits = {other for f in folders for other in tops.get((f, first), ()) if other != path}
            if hits:
                out |= hits | {path}
    return out


_PICKED_PACKAGE = re.compile(rb"import_module\(\s*['\"]([\w.]+)\.['\"]\s*\+")


def _extends_path_text(path: str, data: bytes, sources: dict[str, bytes], absolute: dict[str, str]) -> bool:
    """The file puts folders on sys.path itself, or imports a module beside it that does
    (`import _init_paths`): only then may its imports name a folder elsewhere in the run."""
    if b"sys.path" in data:
        return True
    folder = os.path.dirname(absolute[path])
    words = {m.group(1) for m in re.finditer(rb"^\s*import\s+(\w+)\s*$", data, re.MULTILINE)}
    beside = {os.path.join(folder, w.decode() + ".py") for w in words}
    return any(b"sys.path" in sources[p] for p, full in absolute.items() if full in beside)


def _ending_with(module: bytes, absolute: dict[str, str]) -> set[str]:
    """The one file of the run a dotted module of two parts or more names wherever its
    folder is put on sys.path (`core.function` for lib/core/function.py): see
    _on_added_path."""
    parts = module.decode(errors="replace").split(".")
    if len(parts) < 2:  # `from logger import Logger`: any file so named may be it (a link, not a resolution)
        return {p for p, full in absolute.items() if os.path.basename(full) == parts[0] + ".py"}
    tails = (os.sep + os.path.join(*parts) + ".py", os.sep + os.path.join(*parts, "__init__.py"))
    found = {p for p, full in absolute.items() if full.endswith(tails)}
    return found if len(found) == 1 else set()


def run_root(paths) -> str:
    """Where Python would start the run's imports: the folder holding all its files, or,
    when that folder is a package (an `__init__.py` in it), the folder holding the package
    (`accel-migrate pytorch3dunet/`, whose train.py imports `pytorch3dunet.unet3d.trainer`)."""
    root = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths])
    while os.path.isfile(os.path.join(root, "__init__.py")) and os.path.dirname(root) != root:
        root = os.path.dirname(root)
    return root


def _folders(folder: str, root: str) -> list[str]:
    """`folder` and the folders above it, up to `root`."""
    out = [folder]
    while folder != root and len(folder) > len(root):
        folder = os.path.dirname(folder)
        out.append(folder)
    return out


def _under(path: str, level: int, sources: dict[str, bytes]) -> set[str]:
    """The run's files a relative import of `level` dots in `path` may name: those under
    the package it climbs to."""
    folder = os.path.dirname(os.path.abspath(path))
    for _ in range(level - 1):
        folder = os.path.dirname(folder)
    return {p for p in sources if p != path and os.path.abspath(p).startswith(folder + os.sep)}


def index(sources: dict[str, str]) -> dict[str, FileIndex]:
    """The index of every file of the run that parses (`sources`: path → text)."""
    trees = {}
    for path, text in sources.items():
        try:
            trees[path] = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
    run = {os.path.abspath(p): p for p in trees}
    root = run_root(run) if run else ""
    out = {}
    through: dict[tuple[str, str], set[tuple[str, str]]] = {}  # a factory → the factories it returns the making of
    for path, tree in trees.items():
        out[path] = _index_file(path, tree, run, root, trees)
    for path, tree in trees.items():
        out[path].functions = _functions(tree)
    for path, tree in trees.items():
        has_bases = any(isinstance(n, ast.ClassDef) and n.bases for n in tree.body)
        factories = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in out[path].functions]
        if not has_bases and not factories:
            continue
        imported = _imported(path, tree, run, root, trees)  # read once for both
        if has_bases:
            _hold_subclasses(path, tree, out, imported, run, root, trees)
        if factories:
            through.update(_note_factories(path, tree, factories, out, imported, run, root, trees))
    for _ in range(3):  # `create(name)` → `resnet50(**kw)` → `ResNet(50, **kw)`
        for (path, name), factories_called in through.items():
            function = out[path].functions[name]
            more = {m for f in factories_called if f[0] in out and f[1] in out[f[0]].functions for m in out[f[0]].functions[f[1]].makes}
            function.makes = tuple(sorted(set(function.makes) | more))
    return out


def member_calls(files: dict[str, FileIndex], read_only: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """For each file, its calls of functions and classes of the run's other files (not of
    files the run only reads), as spelled there (Config.project_members): AM914 does not
    advise migrating a module the run migrates already."""
    out = {}
    for path, f in files.items():
        calls = {c.spelling for c in f.calls if c.target[0] != path and c.target[0] not in read_only}
        if calls:
            out[path] = tuple(sorted(calls))
    return out


def inheriting_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, str, str], ...]]:
    """For each file of the run, its calls of classes held back for a base class of another
    file (`_hold_subclasses`): (spelling, base class, its file), as Config.project_inherits
    takes them, so AM914 says why the Accelerator is not passed in (the file named from
    the caller's folder)."""
    out = {}
    for path, f in files.items():
        held = set()
        for call in f.calls:
            owner = files.get(call.target[0])
            function = owner.functions.get(call.target[1]) if owner else None
            if function is not None and function.inherits is not None:
                where = os.path.relpath(function.inherits[0], os.path.dirname(path) or ".")
                held.add((call.spelling, function.inherits[1], where))
        if held:
            out[path] = tuple(sorted(held))
    return out


def ancestors(files: dict[str, FileIndex], bases) -> set[tuple[str, str]]:
    """`bases` ((file, class) of the run) and the classes of other files they build on,
    directly or not."""
    todo, seen = list(bases), set()
    while todo:
        base = todo.pop()
        if base in seen:
            continue
        seen.add(base)
        owner = files.get(base[0])
        todo.extend(owner.bases.get(base[1], ()) if owner is not None else ())
    return seen


def subclassed_elsewhere(files: dict[str, FileIndex], among: set[str] | None = None) -> dict[str, tuple[str, ...]]:
    """For each file of the run, its classes that a class of another file builds on,
    directly or through other bases (Config.project_bases): st-gcn's `IO.gpu()` wraps the
    model in DataParallel for REC_Processor (recognition.py), built on Processor
    (processor.py), built on IO. The base's code runs on every process though its own file
    gets no Accelerator. `among`: the files whose classes count (those the launcher runs),
    and the classes they build of files only read (pytorch-CycleGAN-and-pix2pix's train.py
    builds `TrainOptions()`, whose `parse()` is BaseOptions', of a file the run left out)."""
    todo = [b for path, f in files.items() if among is None or path in among for bs in f.bases.values() for b in bs]
    built = {c.target for path in among or () if path in files for c in files[path].calls}
    todo += [b for path, name in built if path not in (among or ()) and path in files for b in files[path].bases.get(name, ())]
    seen = ancestors(files, todo)
    out: dict[str, set[str]] = {}
    for where, name in seen:
        out.setdefault(where, set()).add(name)
    return {path: tuple(sorted(names)) for path, names in out.items()}


def _hold_subclasses(
    path: str, tree: ast.Module, files: dict[str, FileIndex], imported: tuple[dict, dict], run: dict[str, str], root: str,
    trees: dict[str, ast.Module],
) -> None:
    """A class built on a class of another file of the project (`class Trainer(BaseTrainer)`,
    base/base_trainer.py holding the epoch loop and the checkpoints) is not threaded: the
    migration of its own file cannot see what it inherits, so its methods would get the
    Accelerator while the inherited loop saves and logs on every process. Every class's
    bases of other files are kept (FileIndex.bases): their code runs where it trains.
    `imported`: what the file's module-level imports bind (`_imported`)."""
    modules, functions = imported
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        function = files[path].functions.get(node.name)
        for base in node.bases:
            target, _ = _target(base, modules, functions)
            target = target and _defined_in(*target, run, root, trees)
            if target is None or target[0] == path or not _defines(trees.get(target[0]), target[1]):
                continue
            files[path].bases.setdefault(node.name, set()).add(target)
            if function is not None and function.is_class:
                function.threadable = False
                function.threaded_before = False
                function.inherits = target
            break


def _note_factories(
    path: str, tree: ast.Module, factories: list[ast.FunctionDef], files: dict[str, FileIndex], imported: tuple[dict, dict],
    run: dict[str, str], root: str, trees: dict[str, ast.Module],
) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """Attention-Gated-Networks' `get_model(opts)` imports the class it builds inside the
    function (`from .feedforward_seg_model import FeedForwardSegmentation`) and returns an
    instance of it; pix2pixHD's `create_model(opt)` picks one of three. Function.makes
    keeps those classes, so a file calling `model = get_model(...)`, then
    `model.optimize_parameters()`, is known to drive their training (project/drives.py).
    A factory may return what another factory makes, directly or picked from a table of
    them (open-reid's `create(name)`: `return __factory[name](*args, **kwargs)` over
    `{'resnet50': resnet50, ...}`, each `return ResNet(50, **kwargs)`): returned as
    (this factory → those factories), for the index to follow once every file is read.
    `factories`: its top-level functions the index keeps; `imported` as for _hold_subclasses."""
    modules, functions = imported
    extended = _extends_path(path, tree, run, root, trees)
    own = {n.name: (path, n.name) for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}  # a factory beside its class
    tables = _tables(tree)
    through: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for node in factories:
        local = {**own, **functions}
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom):
                owner = _resolve(inner.module or "", inner.level, path, run, root, extended)
                local.update({a.asname or a.name: (owner, a.name) for a in inner.names if owner is not None and a.name != "*"})
        returned = {n.value.id for n in ast.walk(node) if isinstance(n, ast.Return) and isinstance(n.value, ast.Name)}
        built = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and isinstance(n.value, ast.Call)]
        built += [
            n.value for n in ast.walk(node) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
            and any(isinstance(t, ast.Name) and t.id in returned for t in n.targets)
        ]
        made = set()
        for call in built:
            func = call.func
            picked = tables.get(func.value.id, ()) if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name) else ()
            for callee in [ast.Name(id=name) for name in picked] or [func]:
                target, _ = _target(callee, modules, local)
                target = target and _defined_in(*target, run, root, trees)
                defined = _top_level(trees, target[0]) if target else {}
                if isinstance(defined.get(target[1] if target else ""), ast.ClassDef):
                    made.add(target)
                elif target is not None and target != (path, node.name) and target[1] in defined:
                    through.setdefault((path, node.name), set()).add(target)
            made |= _fluent_made(call, node, modules, local, run, root, trees)
        made |= _plugin_classes(node, tree, local, modules, run, root, trees)
        files[path].functions[node.name].makes = tuple(sorted(made))
    return through


def _fluent_made(call: ast.Call, function: ast.FunctionDef, modules, local, run, root, trees) -> set[tuple[str, str]]:
    """The class of the object a method call hands back itself (pytorch-CycleGAN-and-pix2pix's
    `data_loader = CustomDatasetDataLoader(opt)`, then `dataset = data_loader.load_data()`
    and `return dataset`, where `load_data` returns `self` alone)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return set()
    makers = [
        n.value for n in ast.walk(function) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
        and any(isinstance(t, ast.Name) and t.id == func.value.id for t in n.targets)
    ]
    target, _ = _target(makers[0].func, modules, local) if len(makers) == 1 else (None, None)
    target = target and _defined_in(*target, run, root, trees)
    cls = _top_level(trees, target[0]).get(target[1]) if target else None
    method = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == func.attr), None) if isinstance(cls, ast.ClassDef) else None
    returns = [n.value for n in ast.walk(method) if isinstance(n, ast.Return)] if method is not None else []
    return {target} if returns and all(isinstance(v, ast.Name) and v.id == "self" for v in returns) else set()


def _plugin_classes(node: ast.FunctionDef, tree: ast.Module, local, modules, run, root, trees) -> set[tuple[str, str]]:
    """A factory that imports a module by name and keeps the class there that subclasses a
    base of the run (pytorch-CycleGAN-and-pix2pix's `create_model(opt)`, through
    `find_model_using_name`: `importlib.import_module("models." + name + "_model")`, then
    `issubclass(cls, BaseModel)`): it makes the run's subclasses of that base."""
    own = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    bodies = [node] + [own[c.func.id] for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in own]
    made: set[tuple[str, str]] = set()
    for body in bodies:
        calls = [c for c in ast.walk(body) if isinstance(c, ast.Call)]
        if not any(chain(c.func) in ("importlib.import_module", "import_module") for c in calls):
            continue
        for c in calls:
            if isinstance(c.func, ast.Name) and c.func.id == "issubclass" and len(c.args) == 2:
                base, _ = _target(c.args[1], modules, local)
                base = base and _defined_in(*base, run, root, trees)
                if base:
                    made |= _subclasses_of(base[1], trees)
    return made


def _subclasses_of(name: str, trees: dict[str, ast.Module]) -> set[tuple[str, str]]:
    """The run's top-level classes naming `name` as a base (`class CycleGANModel(BaseModel)`)."""
    return {
        (path, n.name) for path, tree in trees.items() for n in tree.body
        if isinstance(n, ast.ClassDef) and any((chain(b) or "").rsplit(".", 1)[-1] == name for b in n.bases)
    }


def _top_level(trees: dict[str, ast.Module], path: str) -> dict[str, ast.AST]:
    """The functions and classes at the top of the run's file `path`, by name."""
    tree = trees.get(path)
    return {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))} if tree is not None else {}


def _tables(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """Module-level dicts of names (`__factory = {'resnet50': resnet50, ...}`): name →
    the names it holds."""
    out = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Dict) and node.value.values
            and all(isinstance(v, ast.Name) for v in node.value.values)
        ):
            out[node.targets[0].id] = tuple(v.id for v in node.value.values)
    return out


def _functions(tree: ast.Module) -> dict[str, Function]:
    seen: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            seen[node.name] = seen.get(node.name, 0) + 1
    bases = {b.id for n in ast.walk(tree) if isinstance(n, ast.ClassDef) for b in n.bases if isinstance(b, ast.Name)}
    iterators = _batch_iterators(tree)
    out = {}
    for node in tree.body:
        init = init_of(node) if isinstance(node, ast.ClassDef) and node.name not in bases else None
        function = node if isinstance(node, ast.FunctionDef) else init
        if function is None:
            continue
        a = function.args
        params = tuple(p.arg for p in [*a.posonlyargs, *a.args])[1 if init else 0:]  # a class: __init__ less self
        kwonly = tuple(p.arg for p in a.kwonlyargs)
        shaped = (
            seen.get(node.name) == 1 and a.kwarg is None and all(_grad_mode(d) for d in node.decorator_list)
            and ACCELERATOR not in params and not a.posonlyargs and _trains(node) and not _is_model(node)
            and (init is not None or not _returns_outputs(node, params))
        )
        ok = shaped and ACCELERATOR not in kwonly
        out[node.name] = Function(
            node.name, params, kwonly, ok, _stepped_in_loops(node, set(params + kwonly)), init is not None,
            _returned_loaders(node) if init is None else (),
            tuple(sorted({n.func.value.id for n in ast.walk(node) if _state_of_parameter(n, set(params))})) if init is None else (),
            _updates(node) or any(_updates(base) for base in _bases_here(node, tree)),
            _param_roles(node, params) if init is None else _class_param_roles(node, init, params),
            _method_states(node) if init is not None else (),
            init is None and any(torch_saves(n) for n in ast.walk(node)),
            _methods(node) if init is not None else (),
            shaped and ACCELERATOR in kwonly,
            None,
            _collective(node) or any(_collective(base) for base in _bases_here(node, tree)),
            node.name in iterators if init is not None else _returns_one_of(node, iterators),
            _module_params(node, init, params + ((f"**{a.kwarg.arg}",) if a.kwarg else ())),
        )
        if init is not None:
            out[node.name].kept_params = _kept_params(init, params)
        if out[node.name].module_params:
            out[node.name].module_flags = _module_flags(node, function, init is not None)
    return out


def _is_model(node: ast.AST) -> bool:
    """A model class (`class Net(nn.Module)`, or one with a `forward`): it never keeps the
    Accelerator. DDP wraps it, a copy of it (`copy.deepcopy(model)` for an EMA) or a pickle
    would carry the Accelerator along, and its constructor is called outside training
    too; a save of its own (`model.save_checkpoint(path)`) is gated where it is called."""
    if not isinstance(node, ast.ClassDef):
        return False
    named = any((chain(b) or "").split(".")[-1] == "Module" for b in node.bases)
    return named or any(isinstance(m, ast.FunctionDef) and m.name == "forward" for m in node.body)


def _kept_params(init: ast.FunctionDef, params: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(parameter, `self.x`) for each `self.x = parameter` of `init`, the attribute bound
    nowhere else in it: the object a caller hands in is the one the methods use."""
    bound: dict[str, list[str | None]] = {}
    for node in ast.walk(init):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                value = node.value
                bound.setdefault(target.attr, []).append(value.id if isinstance(value, ast.Name) and value.id in params else None)
    return tuple(sorted((kept[0], f"self.{attr}") for attr, kept in bound.items() if len(kept) == 1 and kept[0] is not None))


def _module_params(node: ast.AST, init: ast.FunctionDef | None, params: tuple[str, ...]) -> tuple[str, ...]:
    """The parameters whose `.module` the function reads (`model.module.state_dict()`); for
    a class, those `__init__` keeps on self (`self.model = model`) and a method reads
    `self.model.module` of (Conv-TasNet's Solver saving `self.model.module.serialize(...)`),
    or reads it of each model of a collection kept on self, `**kwargs` included
    (stargan-v2's `CheckpointIO(path, data_parallel=True, **nets)` saving
    `module.module.state_dict()` for each of `self.module_dict.items()`)."""
    guarded = _guarded_module_reads(node)
    items = collection_items(node)
    reads = {
        items.get(ast.unparse(n.value), ast.unparse(n.value)) for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and n.attr == "module"
        and isinstance(n.value, (ast.Name, ast.Attribute)) and id(n) not in guarded
    }
    if init is None:
        return tuple(p for p in params if p in reads)
    kept = _kept_on_self(init, {p.lstrip("*"): p for p in params})
    return tuple(sorted({kept[r] for r in reads if r in kept}))


def _kept_on_self(init: ast.FunctionDef, names: dict[str, str]) -> dict[str, str]:
    """`self.x` → names[v] for each `self.x = v` of `init` with `v` among `names`."""
    return {
        f"self.{t.attr}": names[s.value.id] for s in ast.walk(init) if isinstance(s, ast.Assign)
        and isinstance(s.value, ast.Name) and s.value.id in names
        for t in s.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }


def parameter_defaults(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """Each parameter that has a default, positional or keyword-only → its default."""
    a = function.args
    positional = [*a.posonlyargs, *a.args]
    defaults = dict(zip([p.arg for p in positional][len(positional) - len(a.defaults):], a.defaults))
    defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    return defaults


def _module_flags(node: ast.AST, function: ast.FunctionDef, method: bool) -> tuple[str, ...]:
    """The parameter defaulting to False or None whose truth every unguarded `.module`
    read of `node` waits for (`if data_parallel:`, or `if self.data_parallel:` for a
    class keeping it on self), as a one-element tuple; () when the reads run otherwise."""
    off = {p: p for p, d in parameter_defaults(function).items() if isinstance(d, ast.Constant) and not d.value}
    if method:
        off = _kept_on_self(function, off)
    guarded = _guarded_module_reads(node)
    reads = {id(n) for n in ast.walk(node) if isinstance(n, ast.Attribute) and n.attr == "module" and id(n) not in guarded}
    flags: set[str] = set()
    under: set[int] = set()
    for branch in ast.walk(node):
        if isinstance(branch, ast.If) and ast.unparse(branch.test) in off:
            inside = {id(n) for part in branch.body for n in ast.walk(part)} & reads
            if inside:
                flags.add(off[ast.unparse(branch.test)])
                under |= inside
    return tuple(flags) if reads and under == reads and len(flags) == 1 else ()


def collection_items(node: ast.AST) -> dict[str, str]:
    """Loop variables that take each value of a collection (`for name, m in
    self.nets.items()`, `for m in self.nets.values()`, `for m in self.models`): name → the
    collection, so that `m.module` reads `.module` of what the collection holds."""
    out = {}
    for loop in ast.walk(node):
        if not isinstance(loop, ast.For):
            continue
        source, target = loop.iter, loop.target
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and not source.args:
            if source.func.attr == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                source, target = source.func.value, target.elts[1]
            elif source.func.attr == "values":
                source = source.func.value
        if isinstance(target, ast.Name) and isinstance(source, (ast.Name, ast.Attribute)):
            out[target.id] = ast.unparse(source)
    return out


def _guarded_module_reads(node: ast.AST) -> set[int]:
    """`.module` reads that run only when the object has one: under `hasattr(m, "module")`
    or `isinstance(m, ...)`, in an `if` or a conditional expression (Bert-Multi-Label's
    `self.model.module if hasattr(self.model, 'module') else self.model`)."""
    guarded: set[int] = set()
    for n in ast.walk(node):
        if not isinstance(n, (ast.If, ast.IfExp)):
            continue
        tests = [
            c for c in ast.walk(n.test) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
            and c.func.id in ("hasattr", "isinstance") and len(c.args) == 2
        ]
        tested = {ast.unparse(c.args[0]) for c in tests}
        # a test for the wrapper itself guards every `.module` read under it (lufficc/SSD's
        # `model = self.model` then `if isinstance(model, DistributedDataParallel): model = self.model.module`)
        wrapper = any("DataParallel" in ast.unparse(c.args[1]) or "'module'" in ast.unparse(c.args[1]) for c in tests)
        bodies = n.body if isinstance(n, ast.If) else [n.body]
        for part in bodies:
            guarded |= {
                id(a) for a in ast.walk(part) if isinstance(a, ast.Attribute) and a.attr == "module"
                and (wrapper or ast.unparse(a.value) in tested)
            }
    return guarded


def _batch_iterators(tree: ast.Module) -> set[str]:
    """The module's classes that serve batches by themselves (`__next__` or `__iter__`)
    and are no DataLoader (Chinese-Text-Classification's `DatasetIterater`), and plain
    classes (no base) whose method hands out the batches (SR-GNN's `Data.generate_batch`,
    returning slices of indices the loop then reads with `get_slice(i)`)."""
    return {
        n.name for n in tree.body if isinstance(n, ast.ClassDef)
        and (
            any(isinstance(m, ast.FunctionDef) and m.name in ("__next__", "__iter__") for m in n.body)
            and not any(ast.unparse(b).endswith("DataLoader") for b in n.bases)
            or all(ast.unparse(b) == "object" for b in n.bases) and any(_hands_out_batches(m) for m in n.body)
        )
    }


def _hands_out_batches(method: ast.stmt) -> bool:
    """`def generate_batch(self, batch_size): ... return slices`: a method named for
    batches that returns them."""
    return (
        isinstance(method, ast.FunctionDef) and "batch" in method.name.lower() and not method.name.startswith("_")
        and any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(method))
    )


def _returns_one_of(function: ast.AST, classes: set[str]) -> bool:
    """Every `return` of the function hands out an instance of one of `classes`, built
    there or bound to a name first (`iter = DatasetIterater(...)`, `return iter`)."""
    if not classes:
        return False
    built = {
        t.id for n in ast.walk(function) if isinstance(n, ast.Assign) and _builds(n.value, classes)
        for t in n.targets if isinstance(t, ast.Name)
    }
    returns = [n.value for n in ast.walk(function) if isinstance(n, ast.Return)]
    return bool(returns) and all(
        v is not None and (_builds(v, classes) or isinstance(v, ast.Name) and v.id in built) for v in returns
    )


def _builds(value: ast.AST | None, classes: set[str]) -> bool:
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in classes


_COLLECTIVES = {"all_reduce", "all_gather", "all_gather_object", "reduce", "gather", "reduce_scatter", "broadcast"}


def _collective(node: ast.AST) -> bool:
    """A `torch.distributed` collective called in `node` (`dist.all_reduce(t)`)."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _COLLECTIVES
        and "dist" in ast.unparse(n.func.value)
        for n in ast.walk(node)
    )


def _methods(cls: ast.ClassDef) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple(
        (m.name, tuple(a.arg for a in m.args.args[1:])) for m in cls.body
        if isinstance(m, ast.FunctionDef) and m.name != "__init__" and m.args.args and not m.decorator_list
    )


def _method_states(cls: ast.ClassDef) -> tuple[tuple[str, tuple[int, ...], tuple[str, ...], bool], ...]:
    """The methods of `cls` that save or load the state of a parameter, directly or by
    handing it on to another such method of `self` (followed until nothing changes)."""
    methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef) and m.args.args}
    params = {name: [a.arg for a in m.args.args[1:]] for name, m in methods.items()}
    states: dict[str, set[str]] = {
        name: {n.func.value.id for n in ast.walk(m) if _state_of_parameter(n, set(params[name]))}
        for name, m in methods.items()
    }
    changed = True
    while changed:
        changed = False
        for name, method in methods.items():
            for node in ast.walk(method):
                func = node.func if isinstance(node, ast.Call) else None
                if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"):
                    continue
                callee = params.get(func.attr)
                handed = {
                    a.id for i, a in enumerate(node.args)
                    if isinstance(a, ast.Name) and a.id in params[name] and callee and i < len(callee)
                    and callee[i] in states.get(func.attr, ())
                }
                if handed - states[name]:
                    states[name] |= handed
                    changed = True
    writes = any(torch_saves(n) for n in ast.walk(cls))
    return tuple(
        (name, tuple(i for i, p in enumerate(params[name]) if p in found), tuple(sorted(found)), writes)
        for name, found in sorted(states.items()) if found
    )


# Decorators that leave the call as it is (a keyword-only parameter added to the function
# reaches it unchanged): `@torch.no_grad()` above an evaluate().
_GRAD_MODES = {"no_grad", "inference_mode", "enable_grad"}


def _grad_mode(decorator: ast.expr) -> bool:
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(node, ast.Attribute) and node.attr in _GRAD_MODES and isinstance(node.value, ast.Name) and node.value.id == "torch"


def _returned_loaders(function: ast.FunctionDef) -> tuple[int, ...]:
    """Where the function's returns hand out DataLoaders it builds (`return train_dl,
    test_dl, classes` → (0, 1); `return DataLoader(...)` → (-1,)): the same at every
    `return`, else nothing. A caller in another file then knows what it holds."""
    built = {
        t.id for n in ast.walk(function) if isinstance(n, ast.Assign) and _builds_loader(n.value)
        for t in n.targets if isinstance(t, ast.Name)
    }
    found: set[tuple[int, ...]] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Return):
            value = node.value
            if isinstance(value, ast.Tuple):
                found.add(tuple(i for i, e in enumerate(value.elts) if _builds_loader(e) or (isinstance(e, ast.Name) and e.id in built)))
            else:
                found.add((-1,) if value is not None and (_builds_loader(value) or (isinstance(value, ast.Name) and value.id in built)) else ())
    return found.pop() if len(found) == 1 else ()


def _builds_loader(value: ast.AST | None) -> bool:
    func = value.func if isinstance(value, ast.Call) else None
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name == "DataLoader"


@functools.lru_cache(maxsize=128)
def parsed(source: bytes) -> ast.Module | None:
    """A file's tree, parsed once for all the project readers that ask (None: not Python 3).
    The readers only read the trees they share."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def trees_mentioning(sources: dict[str, bytes], paths, marks: tuple[bytes, ...]):
    """(path, tree, imports) of each of `paths` whose text holds one of `marks` and parses:
    the project readers look only into the files that may hold what they look for."""
    for path in paths:
        data = sources.get(path, b"")
        if not any(mark in data for mark in marks):
            continue
        tree = parsed(data)
        if tree is not None:
            yield path, tree, module_imports(tree)


def top_level_function(source: bytes, name: str) -> ast.FunctionDef | None:
    """The function `name` defined at the top of a file of the run (parsed once, `parsed`)."""
    tree = parsed(source)
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None) if tree is not None else None


def init_of(cls: ast.ClassDef) -> ast.FunctionDef | None:
    """The `__init__` a class defines itself (a class that trains with what it is given:
    AM002 passes the Accelerator to it and its methods use `self.accelerator`)."""
    return next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)


def _stepped_in_loops(function: ast.FunctionDef, params: set[str]) -> frozenset[str]:
    """Parameters stepped (`scheduler.step()`) inside a loop of the function: per batch."""
    found = set()
    for loop in ast.walk(function):
        if not isinstance(loop, ast.For):
            continue
        for node in ast.walk(loop):
            if (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step"
                and isinstance(node.func.value, ast.Name) and node.func.value.id in params
            ):
                found.add(node.func.value.id)
    return frozenset(found)


def _trains(function: ast.FunctionDef) -> bool:
    """A backward call or a loop: the facts that make AM913 speak; or a checkpoint saved
    (`torch.save(...)`: once, by the main process; `accelerator.save(...)` once migrated) or a state loaded through a parameter
    (`model.load_state_dict(...)`: into the unwrapped model). The engine migration
    decides the rest; a function it leaves alone is dropped. A generator's loop hands
    batches on (`def inf_loop(loader): for l in repeat(loader): yield from l`): not one."""
    params = {a.arg for a in function.args.args} if isinstance(function, ast.FunctionDef) else set()
    generator = isinstance(function, ast.FunctionDef) and any(
        isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(function)
    )
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward":
            return True
        if isinstance(node, ast.For) and not generator:
            return True
        if _state_of_parameter(node, params) or torch_saves(node, ("torch", "t", "th", ACCELERATOR)):
            return True  # `accelerator.save(...)`: the save an earlier run threaded
    return False


_ITERATED_THROUGH = {"enumerate", "tqdm", "iter"}


def _param_roles(
    function: ast.FunctionDef | ast.ClassDef, params: tuple[str, ...], name_of: Callable[[ast.AST], str | None] | None = None,
) -> tuple[tuple[str, str], ...]:
    """What the function does with its parameters says what its callers hand it, when the
    caller builds them through helpers it cannot read (`model = get_model(cfg)`): a
    parameter iterated by a `for` is a loader, one whose `.zero_grad()` is called or that
    is stepped in the block that calls `.backward()` an optimizer (a scheduler stepped
    after the epoch's loop is not), one put in `.train()` /
    `.eval()` a model, and one a `for` draws batches from (the body runs the model or moves
    them to a device) a loader. One whose `.parameters()` are read is no optimizer, even
    where its `.zero_grad()` is called. A parameter used two ways is left out."""
    names = set(params)
    found: dict[str, set[str]] = {}
    modules: set[str] = set()  # names whose parameters are read: modules, never optimizers
    beside_backward = _steps_beside_backward(function)
    name_of = name_of or (lambda node: node.id if isinstance(node, ast.Name) and node.id in names else None)

    def note(node: ast.AST | None, role: str) -> None:
        name = name_of(node) if node is not None else None
        if name is not None:
            found.setdefault(name, set()).add(role)

    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if method == "zero_grad" or (method == "step" and id(node) in beside_backward and not node.args):
                note(node.func.value, "optimizer")
            elif method in ("train", "eval") and not node.args:
                note(node.func.value, "model")
            elif method in ("parameters", "named_parameters") and (name := name_of(node.func.value)) is not None:
                modules.add(name)
    for name in modules & set(found):  # `self.actor_critic.zero_grad()` of a module (pytorch-a2c's ACKTR): no optimizer
        found[name].discard("optimizer")
    models = {name for name, roles in found.items() if roles == {"model"}}
    bars = _progress_bars(function)
    for node in ast.walk(function):
        if isinstance(node, ast.For) and _feeds_a_model(node, models, name_of):
            note(_iterated(node.iter, bars), "dataloader")
    return tuple(sorted((name, next(iter(roles))) for name, roles in found.items() if len(roles) == 1))


def _class_param_roles(cls: ast.ClassDef, init: ast.FunctionDef, params: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """A class's constructor parameters, by what its methods do with the attributes
    `__init__` keeps them in (`self.data_loader = data_loader` ... `for batch in
    self.data_loader: self.model(...)`): an evaluator class reads as an evaluation."""
    stored: dict[str, str] = {}
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and _self_attribute(node.targets[0]):
            value = node.value
            while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in ("to", "cuda"):
                value = value.func.value  # `self.model = model.to(device)`
            if isinstance(value, ast.Name) and value.id in params:
                stored[node.targets[0].attr] = value.id

    def name_of(node: ast.AST) -> str | None:
        if _self_attribute(node):
            return stored.get(node.attr)
        return node.id if isinstance(node, ast.Name) and node.id in params else None

    return _param_roles(cls, params, name_of)


def _self_attribute(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _iterated(source: ast.AST, bars: dict[str, ast.AST]) -> ast.AST:
    """What a `for` draws from, through enumerate()/tqdm()/iter() and a progress bar bound
    on its own line (`tk0 = tqdm(loader)` ... `for batch in tk0`)."""
    while True:
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id in _ITERATED_THROUGH and source.args:
            source = source.args[0]
        elif isinstance(source, ast.Name) and source.id in bars:
            source = bars.pop(source.id)
        else:
            return source


def _progress_bars(function: ast.FunctionDef) -> dict[str, ast.AST]:
    """Names bound once in the function, to `tqdm(...)` (or `tqdm.tqdm(...)`)."""
    counts: dict[str, int] = {}
    bars: dict[str, ast.AST] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            callee = value.func if isinstance(value, ast.Call) else None
            tail = callee.id if isinstance(callee, ast.Name) else callee.attr if isinstance(callee, ast.Attribute) else None
            if tail == "tqdm" and value.args:
                bars[node.targets[0].id] = value
    return {name: value for name, value in bars.items() if counts.get(name) == 1}


def _returns_outputs(function: ast.FunctionDef, params: tuple[str, ...]) -> bool:
    """An evaluation that appends what its model parameter computes, whole batch by whole
    batch, to a list it returns as it is (`preds.append(model(x))` ... `return preds`): its
    caller takes the batches apart. Gathering them from N processes needs each output's
    batch dimension, which nothing here shows (a sequence model may put time first; one
    that flattens them itself, `extend(...)`, `torch.cat(...)`, `.tolist()`, shows the
    first), so the function is left without the Accelerator and its loader whole."""
    if _updates(function):
        return False
    models = {name for name, role in _param_roles(function, params) if role == "model"}
    if not models:
        return False
    collections: set[str] = set()
    for loop in (n for n in ast.walk(function) if isinstance(n, ast.For)):
        derived = _derived_from_calls(loop, models)
        for node in ast.walk(loop):
            if (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "append" and isinstance(node.func.value, ast.Name)
                and len(node.args) == 1 and _mentions(node.args[0], derived, models)
                and not _flattened(node.args[0])
            ):
                collections.add(node.func.value.id)
    returned = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Return) and node.value is not None:
            value = node.value
            parts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
            returned |= {p.id for p in parts if isinstance(p, ast.Name)}
    return bool(collections & returned)


def _flattened(expr: ast.AST) -> bool:
    """`x.item()`, `x.tolist()`, `float(x)`: values, not batches of them."""
    if isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in ("item", "tolist"):
            return True
        if isinstance(expr.func, ast.Name) and expr.func.id in ("float", "int", "list"):
            return True
    return False


def _derived_from_calls(loop: ast.For, models: set[str]) -> set[str]:
    """Names bound in the loop from a call of a model, or from names so bound."""
    derived: set[str] = set()
    assigns = [n for n in ast.walk(loop) if isinstance(n, ast.Assign)]
    for _ in range(4):
        before = len(derived)
        for node in assigns:
            if _mentions(node.value, derived, models):
                for target in node.targets:
                    derived |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        if len(derived) == before:
            break
    return derived


def _mentions(expr: ast.AST, derived: set[str], models: set[str]) -> bool:
    for node in ast.walk(expr):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in models:
            return True
        if isinstance(node, ast.Name) and node.id in derived:
            return True
    return False


def _feeds_a_model(loop: ast.For, models: set[str], name_of: Callable[[ast.AST], str | None]) -> bool:
    """The loop's body runs a model parameter or moves what it draws to a device: batches."""
    for node in ast.walk(loop):
        if isinstance(node, ast.Call):
            if name_of(node.func) in models:
                return True
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("cuda", "to"):
                return True
    return False


def _steps_beside_backward(function: ast.AST) -> set[int]:
    """The `.step()` calls that follow a `.backward()` first, in a block that calls it (or in
    a statement of it: `if (i + 1) % accumulation == 0: optimizer.step()`): an optimizer's.
    A scheduler stepped after it (`optimizer.step(); scheduler.step()`), or once the loop
    is over, is not mistaken for one; each backward of a GAN's two has its own."""
    out: set[int] = set()
    for node in ast.walk(function):
        for block in (getattr(node, field, None) for field in ("body", "orelse", "finalbody")):
            if not isinstance(block, list) or not any(_is_backward_statement(s) for s in block):
                continue
            calls = sorted(
                (n for s in block for n in ast.walk(s)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("backward", "step")),
                key=lambda n: (n.lineno, n.col_offset),
            )
            armed = False
            for call in calls:
                if call.func.attr == "backward":
                    armed = True
                elif armed:
                    out.add(id(call))
                    armed = False
    return out


def _is_backward_statement(statement: ast.stmt) -> bool:
    """`loss.backward()`, `scaler.scale(loss).backward()`, or a `with` / `if` / `try`
    holding one (`with amp.scale_loss(loss, opt) as s: s.backward()`); not a loop's."""
    if isinstance(statement, ast.Expr):
        value = statement.value
        return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "backward"
    if isinstance(statement, (ast.With, ast.AsyncWith, ast.If, ast.Try)):
        blocks = [statement.body, getattr(statement, "orelse", []), getattr(statement, "finalbody", [])]
        blocks += [h.body for h in getattr(statement, "handlers", [])]
        return any(_is_backward_statement(s) for block in blocks for s in block)
    return False


def _bases_here(node: ast.AST, tree: ast.Module, depth: int = 3) -> list[ast.ClassDef]:
    """The classes of the same module a class is built on (`class Trainer(BaseTrainer)`,
    the base holding the epoch loop), through a few levels."""
    if not isinstance(node, ast.ClassDef) or depth == 0:
        return []
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    found = [classes[b.id] for b in node.bases if isinstance(b, ast.Name) and b.id in classes and b.id != node.name]
    return found + [deeper for base in found for deeper in _bases_here(base, tree, depth - 1)]


def _updates(function: ast.FunctionDef) -> bool:
    """A `.backward()` or `.step()` call: the function trains (an evaluation only reads)."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("backward", "step")
        for n in ast.walk(function)
    )


def torch_saves(node: ast.AST, owners: tuple[str, ...] = ("torch", "t", "th")) -> bool:
    """`torch.save(...)` (as `torch.save` or the `t.save` of `import torch as t`)."""
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "save"
        and isinstance(node.func.value, ast.Name) and node.func.value.id in owners
    )


def _state_of_parameter(node: ast.AST, params: set[str]) -> bool:
    """`model.state_dict()` or `model.load_state_dict(...)` on a parameter `model`."""
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("state_dict", "load_state_dict")
        and isinstance(node.func.value, ast.Name) and node.func.value.id in params
    )


def resolve_module(module: str, level: int, path: str, run: dict[str, str], root: str) -> str | None:
    """The run's file that `from module import ...` (or a relative import of `level`) in
    `path` names; `run`: absolute path → path as given, `root`: run_root()."""
    return _resolve(module, level, path, run, root)


def _resolve(
    module: str, level: int, path: str, run: dict[str, str], root: str, extended: bool | tuple[str, ...] = False,
) -> str | None:
    """The run's file that `import module` (or a relative import of `level`) in `path` names."""
    here = os.path.dirname(os.path.abspath(path))
    parts = module.split(".") if module else []
    if level:
        base = here
        for _ in range(level - 1):
            base = os.path.dirname(base)
        bases = [base]
    else:
        bases = [here]
        while bases[-1] != root and len(bases[-1]) > len(root):
            bases.append(os.path.dirname(bases[-1]))
    for base in bases:
        stem = os.path.join(base, *parts)
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
            if candidate in run:
                return run[candidate]
    if not level and parts:
        found = _in_own_project(parts, bases, run)
        if found is not None:
            return found
    if extended and not level and isinstance(extended, tuple):
        for folder in extended:  # `from logger import Logger` where _init_paths put lib/ on sys.path
            stem = os.path.join(folder, *parts)
            for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
                if candidate in run:
                    return run[candidate]
    return _on_added_path(parts, run) if extended and not level else None


def installed_packages(files: dict[str, "FileIndex"]) -> dict[str, str]:
    """For each file of the run inside a package that installs from a project of its own:
    that project's folder (`installed_package`)."""
    run = {os.path.abspath(p): p for p in files}
    root = run_root(run) if run else ""
    found = {path: installed_package(path, run, root) for path in files}
    return {path: folder for path, folder in found.items() if folder}


def installed_package(path: str, run: dict[str, str], root: str) -> str | None:
    """The folder of the project of its own whose package holds `path` (st-gcn's
    `torchlight`, for torchlight/torchlight/io.py: a folder named like the package, inside
    the run's root, with the package in it and no `__init__.py` of its own), as the run's
    paths spell it; None for anything else."""
    folder = os.path.dirname(os.path.abspath(path))
    while folder.startswith(root + os.sep):
        outer = os.path.dirname(folder)
        if (
            outer != root and outer.startswith(root + os.sep)
            and os.path.basename(outer) == os.path.basename(folder)
            and os.path.join(folder, "__init__.py") in run and os.path.join(outer, "__init__.py") not in run
        ):
            return os.path.relpath(outer, root).replace(os.sep, "/")
        folder = outer
    return None


def _in_own_project(parts: list[str], bases: list[str], run: dict[str, str]) -> str | None:
    """`import torchlight` where torchlight/ is a project of its own, installed from its
    setup.py (st-gcn's torchlight/torchlight/__init__.py): a folder named like the package
    with the package inside, a regular one (an `__init__.py`), is what the import finds
    once installed; the outer folder, a namespace package at most, only if nothing is."""
    for base in bases:
        package = os.path.join(base, parts[0], parts[0])
        if os.path.join(package, "__init__.py") not in run:
            continue
        stem = os.path.join(package, *parts[1:])
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
            if candidate in run:
                return run[candidate]
    return None


def _on_added_path(parts: list[str], run: dict[str, str]) -> str | None:
    """`from core.function import train` in tools/train.py, where `import _init_paths` put
    `lib/` on sys.path (HRNet and many research repositories): a dotted module of two parts
    or more that exactly one file of the run ends with is that file. One part (`import
    utils`) says too little to be sure; a file that puts nothing on sys.path (itself or
    through a module beside it) is not looked at (`_extends_path`)."""
    if len(parts) < 2:
        return None
    tails = (os.sep + os.path.join(*parts) + ".py", os.sep + os.path.join(*parts, "__init__.py"))
    found = {run[p] for p in run if p.endswith(tails)}
    return found.pop() if len(found) == 1 else None


_MAIN_TESTS = ("is_main_process", "is_local_main_process")


def _under_main_tests(tree: ast.Module) -> set[int]:
    """The calls in the body of an `if accelerator.is_main_process:` (a migrated file's
    guard) or `if dist.get_rank() == 0:`: only the main process makes them."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (isinstance(node.test, ast.Attribute) and node.test.attr in _MAIN_TESTS or _rank_zero(node.test)):
            out |= {id(n) for statement in node.body for n in ast.walk(statement) if isinstance(n, ast.Call)}
    return out


def _rank_zero(test: ast.expr) -> bool:
    """`dist.get_rank() == 0`, `args.local_rank == 0`, also as a term of an `and` (Swin's
    `if dist.get_rank() == 0 and epoch % freq == 0:` around its checkpoint save)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_rank_zero(v) for v in test.values)
    return (
        isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == 0
        and "rank" in ast.unparse(test.left).lower()
    )


def _index_file(
    path: str, tree: ast.Module, run: dict[str, str], root: str, trees: dict[str, ast.Module] | None = None,
) -> FileIndex:
    result = FileIndex(path)
    modules, functions = _imported(path, tree, run, root, trees)

    def follow(target: tuple[str, str] | None) -> tuple[str, str] | None:
        """Through the packages that re-export it (`from trainer import Trainer`, whose
        trainer/__init__.py says `from .trainer import *`), to the file defining it."""
        return target and _defined_in(*target, run, root, trees or {})

    # a package's `from .loop import train_fn`, resolved: the re-export the index follows,
    # not a mention it cannot (elsewhere an unused import still holds the function back)
    followed = {
        id(alias) for n in tree.body if isinstance(n, ast.ImportFrom) and os.path.basename(path) == "__init__.py"
        for alias in n.names if (alias.asname or alias.name) in functions or (alias.asname or alias.name) in modules
    }
    called: set[int] = set()
    main_only = _under_main_tests(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            target, spelling = _target(node.func, modules, functions)
            target = follow(target)
            if target is not None:
                called.add(id(node.func))
                result.calls.append(_call(node, spelling, target, id(node) in main_only))
    for node, target, spelling in _calls_of_picked_modules(path, tree, run, root, trees or {}):
        result.calls.append(_call(node, spelling, target, id(node) in main_only))
    one, several = _instances(tree, modules, functions)
    result.instances = {name: follow(made) for name, made in one.items()}
    result.picked = {name: tuple(follow(m) for m in made) for name, made in several.items()}
    result.picked.update(_picked_instances(tree, modules, run, root, trees or {}))
    for node in ast.walk(tree):  # `ConfigParser.from_args(args)`: a method called on a class of another file
        func = node.func if isinstance(node, ast.Call) else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in functions and id(node) not in main_only:
            owner = follow(functions[func.value.id])
            if owner is not None:
                result.class_calls.add((owner[0], f"{owner[1]}.{func.attr}"))
    arguments = {
        id(a) for n in ast.walk(tree) if isinstance(n, ast.Call) and id(n) not in main_only
        for a in [*n.args, *(k.value for k in n.keywords)]
    }
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and id(node) not in called:
            target, _ = _target(node, modules, functions)
            if target is not None:
                result.values.add(follow(target))
                if id(node) in arguments:
                    result.handed.add(follow(target))
        if isinstance(node, ast.Name) and id(node) not in called:
            result.local_uses.add(node.id)
        if isinstance(node, ast.Name):
            result.words.add(node.id)
        elif isinstance(node, ast.Attribute):
            result.words.add(node.attr)
        elif isinstance(node, ast.alias) and id(node) not in followed:
            result.words.update({node.name.split(".")[-1], node.asname or ""})
    return result


def _extends_path(path: str, tree: ast.Module, run: dict[str, str], root: str, trees: dict[str, ast.Module]) -> bool | tuple[str, ...]:
    """The file puts folders on sys.path, itself or through a module of the run it
    imports (`import _init_paths`): the folders, where they can be read (`osp.join(
    osp.dirname(__file__), 'lib')`), else True; False when it puts none."""
    sources = [(path, tree)] if _sets_sys_path(tree) else []
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, 0, path, run, root) if "." not in alias.name else None
                if target is not None and target in trees and _sets_sys_path(trees[target]):
                    sources.append((target, trees[target]))
    if not sources:
        return False
    folders = tuple(f for p, t in sources for f in _folders_put(p, t))
    return folders or True


_NORMALISING = ("abspath", "realpath", "normpath")


def _folders_put(path: str, tree: ast.Module) -> list[str]:
    """The folders a module's top level puts on sys.path (`sys.path.insert(0, p)`,
    `sys.path.append(p)`, or a helper of its own doing so, CenterNet's `add_path(p)`),
    where `p` is read from its own folder (`osp.dirname(__file__)`) and strings."""
    helpers = {
        n.name for n in tree.body if isinstance(n, ast.FunctionDef)
        and any(_sys_path_call(c) for c in ast.walk(n) if isinstance(c, ast.Call))
    }
    names: dict[str, str] = {}
    out: list[str] = []

    def value(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return os.path.abspath(path) if node.id == "__file__" else names.get(node.id)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
            last = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            args = [value(a) for a in node.args]
            if None in args or not args:
                return None
            if last == "join":
                return os.path.normpath(os.path.join(*args)) if os.path.isabs(args[0]) else None
            if last == "dirname" and len(args) == 1:
                return os.path.dirname(args[0])
            if last in _NORMALISING and len(args) == 1:
                return os.path.normpath(args[0])
        return None

    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found = value(node.value)
            if found is not None:
                names[node.targets[0].id] = found
        call = node.value if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else None
        if call is None or not call.args:
            continue
        if _sys_path_call(call) or isinstance(call.func, ast.Name) and call.func.id in helpers:
            found = value(call.args[-1])
            if found is not None and os.path.isabs(found):
                out.append(found)
    return out


def _sys_path_call(call: ast.Call) -> bool:
    """`sys.path.insert(...)` or `sys.path.append(...)`."""
    func = call.func
    return (
        isinstance(func, ast.Attribute) and func.attr in ("insert", "append")
        and isinstance(func.value, ast.Attribute) and func.value.attr == "path"
        and isinstance(func.value.value, ast.Name) and func.value.value.id == "sys"
    )


def _sets_sys_path(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.Attribute) and n.attr == "path" and isinstance(n.value, ast.Name) and n.value.id == "sys"
        for n in ast.walk(tree)
    )


def _imported(path: str, tree: ast.Module, run: dict[str, str], root: str, trees: dict[str, ast.Module] | None = None):
    """What the module-level imports of `path` bind to files of the run: local name →
    module file, and local name → (file, function); names bound again elsewhere left out."""
    modules: dict[str, str] = {}  # local name → file (a module of the run)
    functions: dict[str, tuple[str, str]] = {}  # local name → (file, function)
    extended = _extends_path(path, tree, run, root, trees or {})
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, 0, path, run, root, extended)
                if target is not None and (alias.asname or "." not in alias.name):
                    modules[alias.asname or alias.name] = target
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":  # `from utils import *`: the functions and classes it exports
                    functions.update(_star_imported(node, path, run, root, extended, trees or {}))
                    continue
                local = alias.asname or alias.name
                sub = f"{node.module}.{alias.name}" if node.module else alias.name
                as_module = _resolve(sub, node.level, path, run, root, extended)
                if as_module is not None:
                    modules[local] = as_module
                    continue
                owner = _resolve(node.module or "", node.level, path, run, root, extended)
                if owner is not None and owner != path:
                    functions[local] = (owner, alias.name)
    others, imported_locally = _bound_elsewhere(tree)
    bound = others | imported_locally
    modules = {k: v for k, v in modules.items() if k not in bound and v != path}
    functions = {k: v for k, v in functions.items() if k not in bound}
    for local, target in _local_imports(path, tree, run, root, extended, others).items():
        functions.setdefault(local, target)
    modules = modules | _submodules(modules, run)
    functions.update(_renamed(tree, modules, functions))
    return modules, functions


def _renamed(tree: ast.Module, modules: dict[str, str], functions: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """`Exp = Exp_Main` (Autoformer's run.py, inside main(), then `exp = Exp(args)` and
    `exp.test(setting)`), or `Exp = experiments.Exp_Main`: a name bound once, to a function
    or class of another file of the run, is that function or class."""
    candidates = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if name in functions or name in modules:
            continue
        if isinstance(value, ast.Name) and value.id in functions:
            candidates[name] = functions[value.id]
        elif isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id in modules:
            candidates[name] = (modules[value.value.id], value.attr)
    if not candidates:
        return {}  # most files: no second walk
    stores: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stores[node.name] = stores.get(node.name, 0) + 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                stores[local] = stores.get(local, 0) + 1
    return {name: target for name, target in candidates.items() if stores.get(name) == 1}


def _local_imports(
    path: str, tree: ast.Module, run: dict[str, str], root: str, extended: bool, others: set[str],
) -> dict[str, tuple[str, str]]:
    """`from pybert.io.task_data import TaskData` inside `main()` (lonePatient/Bert's
    run_bert.py, under `if args.do_data:`): a function or class of the run imported where
    it is used. Only a name every such import binds to the same definition, and nothing
    else binds (`others`)."""
    top = {id(n) for n in tree.body}
    found: dict[str, set[tuple[str, str] | None]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or id(node) in top:
            continue
        for alias in node.names:
            if alias.name == "*":
                continue
            sub = f"{node.module}.{alias.name}" if node.module else alias.name
            owner = None if _resolve(sub, node.level, path, run, root, extended) else _resolve(node.module or "", node.level, path, run, root, extended)
            found.setdefault(alias.asname or alias.name, set()).add((owner, alias.name) if owner and owner != path else None)
    return {
        name: targets.pop() for name, targets in found.items()
        if len(targets) == 1 and None not in targets and name not in others
    }


def _star_imported(
    node: ast.ImportFrom, path: str, run: dict[str, str], root: str, extended: bool, trees: dict[str, ast.Module],
) -> dict[str, tuple[str, str]]:
    """The SSD tutorial's `from utils import *`, then `save_checkpoint(epoch, model,
    optimizer)`: each def and class the module of the run exports, by its name."""
    owner = _resolve(node.module or "", node.level, path, run, root, extended)
    tree = trees.get(owner) if owner is not None and owner != path else None
    if tree is None:
        return {}
    return {
        n.name: (owner, n.name) for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _exported(tree, n.name)
    }


def _submodules(modules: dict[str, str], run: dict[str, str]) -> dict[str, str]:
    """`import torchreid`, then `torchreid.engine.ImageSoftmaxEngine(...)`: the modules of
    the run inside an imported package, by the dotted names the file reaches them through."""
    absolute = {name: path for path, name in run.items()}
    out: dict[str, str] = {}
    for local, target in modules.items():
        if os.path.basename(target) != "__init__.py" or target not in absolute:
            continue
        folder = os.path.dirname(absolute[target])
        for path, name in run.items():
            if not path.startswith(folder + os.sep) or name == target:
                continue
            parts = os.path.splitext(os.path.relpath(path, folder))[0].split(os.sep)
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            if parts and all(p.isidentifier() for p in parts):
                out[".".join([local, *parts])] = name
    return out


def _defined_in(
    owner: str, name: str, run: dict[str, str], root: str, trees: dict[str, ast.Module], seen: frozenset[str] = frozenset(),
) -> tuple[str, str]:
    """Where `name`, imported from the file `owner`, is defined: `owner` itself, or the
    module of the run that `owner` takes it from and re-exports (`from .trainer import *`
    or `from .engine import train_one_epoch as train` in a package's `__init__.py`)."""
    tree = trees.get(owner)
    if tree is None or owner in seen or _defines(tree, name):
        return owner, name
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        for alias in node.names:
            star = alias.name == "*"
            if not star and (alias.asname or alias.name) != name:
                continue
            source = _resolve(node.module or "", node.level, owner, run, root)
            if source is None or source == owner:
                continue
            found = _defined_in(source, name if star else alias.name, run, root, trees, seen | {owner})
            if not star or _defines(trees.get(found[0]), found[1]) and _exported(trees[source], name):
                return found
    return owner, name


def _defines(tree: ast.Module | None, name: str) -> bool:
    """The module binds `name` at its top level with a def or class."""
    return tree is not None and any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name for n in tree.body
    )


def _exported(tree: ast.Module, name: str) -> bool:
    """`from module import *` binds `name`: public, and listed in `__all__` when it has one."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                return any(isinstance(e, ast.Constant) and e.value == name for e in node.value.elts)
    return not name.startswith("_")


def _target(func: ast.AST, modules: dict[str, str], functions: dict[str, tuple[str, str]]):
    if isinstance(func, ast.Name) and func.id in functions:
        return functions[func.id], func.id
    owner = chain(func.value) if isinstance(func, ast.Attribute) else None
    if owner in modules:
        return (modules[owner], func.attr), f"{owner}.{func.attr}"
    return None, None


def chain(node: ast.AST) -> str | None:
    """`torchreid.engine` for that expression: a dotted name, or None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = chain(node.value)
        return owner and f"{owner}.{node.attr}"
    return None


def _instances(tree: ast.Module, modules, functions) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[tuple[str, str], ...]]]:
    """Names bound to a call of something of another file of the run, and to nothing else
    (`es = utils.EarlyStopping(patience=5)`): what their calls (`es(score, model)`) run;
    and, apart, names bound to calls of several of them and nothing else (MUNIT's `trainer =
    MUNIT_Trainer(config)` in one branch, `trainer = UNIT_Trainer(config)` in the next). A
    name bound again to a wrapper of itself (`self.model = nn.DataParallel(self.model)`,
    `convert_model(self.model).cuda()`) still holds the instance underneath, and a name
    bound to such a name or to its `.module` (lidar-bonnetal's `self.model_single =
    self.model.module`) is that instance too."""
    bound: dict[str, list[tuple[str, str] | None]] = {}
    aliases: dict[str, set[str]] = {}
    assignments = sorted(
        (n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for node in assignments:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value if len(targets) == 1 and not isinstance(node, ast.AugAssign) else None
        for target in targets:
            name = _dotted(target)
            if name is None:
                continue
            made = _target(value.func, modules, functions)[0] if isinstance(value, ast.Call) else None
            if made is None and value is not None and _wraps(value, name):
                continue
            held = _held(value) if made is None and value is not None else None
            if held is not None and held != name:
                aliases.setdefault(name, set()).add(held)
                bound.setdefault(name, [])
                continue
            bound.setdefault(name, []).append(made)
    found = {name: made[0] for name, made in bound.items() if len(made) == 1 and made[0] is not None and name not in aliases}
    for name, held in aliases.items():
        made = {found.get(h) for h in held} | set(bound[name])
        if len(made) == 1 and None not in made:
            found[name] = made.pop()
    several = {
        name: tuple(sorted(set(made))) for name, made in bound.items()
        if name not in found and name not in aliases and None not in made and len(set(made)) > 1
    }
    return found, several


def _call(node: ast.Call, spelling: str, target: tuple[str, str], main_only: bool) -> "Call":
    """The index's record of a call of another file's function or class."""
    return Call(
        spelling, target,
        tuple(a.id if isinstance(a, ast.Name) else None for a in node.args if not isinstance(a, ast.Starred)),
        tuple((k.arg, k.value.id if isinstance(k.value, ast.Name) else None) for k in node.keywords if k.arg),
        any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords),
        main_only,
    )


def _calls_of_picked_modules(
    path: str, tree: ast.Module, run: dict[str, str], root: str, trees,
) -> list[tuple[ast.Call, tuple[str, str], str]]:
    """`x = import_module('models.' + name)`, then `x.Model(config)` (Chinese-Text-Classification's
    run.py picking its model's module by name): a call of that function or class of every
    module of the run in that package, as (call, target, spelling)."""
    here = os.path.dirname(os.path.abspath(path))
    picked: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        package = _package_picked(node.value)
        if package is None:
            continue
        base = here
        while True:
            folder = os.path.join(base, *package.split("."))
            found = sorted(v for k, v in run.items() if os.path.dirname(k) == folder and not k.endswith("__init__.py"))
            if found or base == root or len(base) <= len(root):
                break
            base = os.path.dirname(base)
        if found:
            picked[node.targets[0].id] = found
    out = []
    for node in ast.walk(tree) if picked else ():
        func = node.func if isinstance(node, ast.Call) else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in picked:
            for module in picked[func.value.id]:
                if func.attr in _top_level(trees, module):
                    out.append((node, (module, func.attr), f"{func.value.id}.{func.attr}"))
    return out


def _package_picked(value: ast.expr) -> str | None:
    """`models` of `import_module('models.' + name)` (or `importlib.import_module`)."""
    if not (isinstance(value, ast.Call) and value.args and (chain(value.func) or "").rpartition(".")[2] == "import_module"):
        return None
    text = value.args[0]
    if isinstance(text, ast.BinOp) and isinstance(text.op, ast.Add) and isinstance(text.left, ast.Constant):
        prefix = text.left.value
        if isinstance(prefix, str) and prefix.endswith(".") and all(p.isidentifier() for p in prefix[:-1].split(".")):
            return prefix[:-1]
    return None


def _picked_instances(tree: ast.Module, modules: dict[str, str], run, root, trees) -> dict[str, tuple[tuple[str, str], ...]]:
    """Names bound to an instance of a class picked by name from a module of the run
    (human-pose-estimation's `valid_dataset = eval('dataset.' + config.DATASET.DATASET)(...)`,
    or `getattr(models, name)(...)`): name → the classes that module holds, its own and
    those it imports (`from .coco import COCODataset as coco`)."""
    out = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        module = _picked_from(node.value.func) if isinstance(node.value, ast.Call) else None
        owner = modules.get(module or "")
        classes = _classes_held(owner, run, root, trees) if owner else ()
        if classes:
            out[node.targets[0].id] = classes
    return out


def _picked_from(func: ast.expr) -> str | None:
    """`dataset` of `eval('dataset.' + name)` and of `getattr(dataset, name)`."""
    if not (isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.args):
        return None
    if func.func.id == "getattr" and len(func.args) >= 2 and isinstance(func.args[0], ast.Name):
        return func.args[0].id
    text = func.args[0]
    if func.func.id == "eval" and isinstance(text, ast.BinOp) and isinstance(text.op, ast.Add):
        prefix = text.left
        if isinstance(prefix, ast.Constant) and isinstance(prefix.value, str) and prefix.value.endswith("."):
            return prefix.value[:-1]
    return None


def _classes_held(owner: str, run, root, trees) -> tuple[tuple[str, str], ...]:
    tree = trees.get(owner)
    if tree is None:
        return ()
    found = {(owner, n.name) for n in tree.body if isinstance(n, ast.ClassDef)}
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        source = _resolve(node.module or "", node.level, owner, run, root)
        for alias in node.names if source is not None else ():
            where = _defined_in(source, alias.name, run, root, trees)
            if isinstance(_top_level(trees, where[0]).get(where[1]), ast.ClassDef):
                found.add(where)
    return tuple(sorted(found))


# methods that hand back the module they are called on
_SELF_RETURNING = {"cuda", "to", "cpu", "train", "eval", "float", "half", "double", "bfloat16", "requires_grad_"}


def _wraps(value: ast.expr, name: str) -> bool:
    """`nn.DataParallel(name, ...)`, `name.cuda()`, `convert_model(name).cuda()`: the
    object `name` holds, wrapped or moved."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr in _SELF_RETURNING:
        return _dotted(func.value) == name or _wraps(func.value, name)
    return bool(value.args) and _dotted(value.args[0]) == name


def _held(value: ast.expr) -> str | None:
    """`self.model` or `self.model.module`: the name whose object this is."""
    if isinstance(value, ast.Attribute) and value.attr == "module":
        return _dotted(value.value)
    return _dotted(value) if isinstance(value, (ast.Name, ast.Attribute)) else None


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _bound_elsewhere(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names bound by anything but a module-level import (such a name may not be the
    module), as those bound otherwise and those an import inside a function binds."""
    top_imports = {id(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
    names: set[str] = set()
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top_imports:
            imported.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    return names, imported


def candidates(
    files: dict[str, FileIndex], outside: dict[str, str] | None = None, read_only: frozenset[str] = frozenset(),
    dropped: frozenset[tuple[str, str]] = frozenset(),
) -> set[tuple[str, str]]:
    """Functions that may be threaded: called from another file of the run, threadable
    (or threaded before, at calls that pass it the Accelerator), never used as a value in the run, not named by a file of the run through a route the
    index does not follow (a re-export), nor by a file beside the run's files that is not
    in it (`outside`: path → text; a caller we would not update), and not in a file that
    itself calls a threaded one. A file the run only reads (`read_only`, the project around
    the run's files) is never changed: a function it calls without the Accelerator, or
    defines without having been threaded before, is not threaded. `dropped`: functions an
    earlier round could not thread; a file calling only those may have its own threaded."""
    used_as_value = set().union(*(f.values for f in files.values())) if files else set()
    # a function only the main process calls (a checkpoint helper under the guard a first
    # migration wrote) runs no collective and saves once already: it is not threaded, so a
    # second run writes what the first did
    everyone = {c.target for f in files.values() for c in f.calls if not c.main_only}
    out, held = set(), set()
    for f in files.values():
        for call in f.calls:
            if call.target not in everyone:
                continue
            owner = files.get(call.target[0])
            function = owner.functions.get(call.target[1]) if owner else None
            if function is None or call.target in used_as_value or call.has_star:
                continue
            if call.target[1] in owner.local_uses:
                continue  # the engine calls or passes it itself: AM002's single-file case, not this one
            passes = any(k == ACCELERATOR for k, _ in call.keywords)
            if f.path in read_only and not passes or owner.path in read_only and not function.threaded_before:
                held.add(call.target)
            elif function.threaded_before if passes else function.threadable:
                out.add(call.target)
    out = {t for t in out - held if not _unfollowed(files, t) and not _named_outside(outside or {}, t)}
    out -= _helpers_of_engines(files, out)
    out -= dropped
    callers = {f.path for f in files.values() for c in f.calls if c.target in out}
    return {t for t in out if t[0] not in callers}


def _helpers_of_engines(files: dict[str, FileIndex], out: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Candidates that neither train, save nor take a model, optimizer or loader (a top-k
    `accuracy(output, target, topk)` looping over `topk`), called only from files whose own
    functions are candidates that do: an engine's helpers. Threading one would hold the
    engine back (a file calling a threaded function is not threaded itself); they need no
    Accelerator, so they give way."""
    def substantial(t: tuple[str, str]) -> bool:
        f = files[t[0]].functions[t[1]]
        return f.updates or bool(f.param_roles or f.state_params) or f.state_writes or f.threaded_before or f.is_class

    engines = {t[0] for t in out if substantial(t)}
    helpers = set()
    for t in out - {t for t in out if substantial(t)}:
        calling = {f.path for f in files.values() for c in f.calls if c.target == t}
        if calling and calling <= engines:
            helpers.add(t)
    return helpers


def _unfollowed(files: dict[str, FileIndex], target: tuple[str, str]) -> bool:
    """A file of the run (not the engine) names the function but has no call the index
    resolved to it: it may reach it some other way (`from pkg import train_fn`, re-exported)."""
    for f in files.values():
        if f.path != target[0] and target[1] in f.words and not any(c.target == target for c in f.calls):
            return True
    return False


def _named_outside(outside: dict[str, str], target: tuple[str, str]) -> bool:
    """A file beside the run names the function and imports its module (or loads modules
    by name): it may call it, and would not be updated. A file that only mentions the
    name (`Test` in a docstring of `data/camvid.py`) does not hold the function back."""
    stem = os.path.splitext(os.path.basename(target[0]))[0]
    if stem == "__init__":
        stem = os.path.basename(os.path.dirname(target[0]))
    pattern = re.compile(rf"\b{re.escape(target[1])}\b")
    module = re.escape(stem)
    imports = re.compile(
        rf"(\bimport\s+[^#\n]*\b{module}\b|from\s+[\w.]*\b{module}\s+import\b|from\s+[\w.]+\s+import\s+[^#\n]*\b{module}\b)"
        r"|import_module|__import__|\bimportlib\b|\bexec\(",
        re.M,
    )
    return any(pattern.search(text) and imports.search(text) for text in outside.values())


def class_method_calls(source: bytes, path: str, targets: set[tuple[str, str]]) -> list[tuple[str, tuple[str, str]]]:
    """The calls here of `targets` that are methods of another file's classes, called on the
    class (`mydatasets.MRDataset.splits(...)`, a class method: Shawn1993's MR data, which
    downloads, shuffles and cuts: reader R4, 29th session), as (spelling, target): the class
    by its name, from a module this file imports."""
    wanted = {(owner, name) for owner, name in targets if owner != path and "." in name}
    if not wanted or not any(name.split(".")[0].encode() in source for _, name in wanted):
        return []
    tree = parsed(source)
    if tree is None:
        return []
    imported = {
        part for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
        for part in [*(getattr(node, "module", None) or "").split("."), *(a.name.split(".")[-1] for a in node.names)]
    }
    out = []
    for node in ast.walk(tree):
        spelled = chain(node.func) if isinstance(node, ast.Call) else None
        for owner, name in wanted:
            stem = os.path.splitext(os.path.basename(owner))[0]
            if spelled and (spelled == name or spelled.endswith(f".{name}")) and (stem in imported or name.split(".")[0] in imported):
                out.append((spelled, (owner, name)))
    return out
