"""Several files of one run migrated as one program (issue 13, first step).

A set-up file (`train.py`) prepares the model, optimizer and loaders and hands them to a
function of another file of the run (`engine.train_fn(loader, model, optimizer, device,
scheduler)`), whose body holds the backward, the clipping and the metrics. Alone, the
set-up is prepared and the engine is left as written with AM913/AM914 findings. Here the
two are migrated together, whole or not at all:

- `index()` reads every file of the run once with `ast` (cheap, no LibCST): the imports
  that reach another file of the run (`import engine`, `import engine as e`,
  `from engine import train_fn as tf`, `from . import engine`, packages) and the calls they
  make, and each file's top-level functions.
- A function is *threaded* (it gets a keyword-only `accelerator` parameter) when it
  trains or evaluates (a `.backward(`, or a loop in it), is called from another file of
  the run, is never used there as a value, and can take the keyword (no `**kwargs`, no
  `accelerator` parameter yet, defined once). A class that trains with what it is given
  (`Trainer(model, optimizer, loader)`, its own `__init__`, no subclass) is threaded the
  same way: `__init__` takes the keyword and stores `self.accelerator` (AM002's classes).
- The callers are migrated with `Config.project_calls` naming the call spellings that
  pass `accelerator=...` (AM914 writes it where an Accelerator reaches the call, and
  reports it where none does).
- The engine file is migrated with the rules of a single script, with its callers written
  as a stub appended below the module (`Config.project_callers`): a function that makes
  the Accelerator, prepares the parameters the real callers pass prepared, and calls the
  threaded functions. The rules then see exactly what they see when caller and engine
  share a file (AM002 threads the parameter, the loader is known to be prepared, the
  verifier checks the result); the stub is cut off again before anything is shown or
  written, and findings on its lines are dropped. Appended below, it moves no line of the
  real code.
- Whole or nothing: a call site that ends up without `accelerator=`, a function the engine
  migration did not thread, a parameter prepared at one call and not at another, or a
  result that failed or was refused drops the function, and the run is redone without it
  until nothing is dropped. A file with nothing threaded is migrated as it is alone.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from typing import Callable

from migrator.findings import FileResult, FileStatus

STUB = "_accel_migrate_callers"
SEPARATOR = "\n\n\n# accel-migrate: the callers in other files of this run (removed after migration)\n"
ACCELERATOR = "accelerator"
_ROUNDS = 6


@dataclass
class Function:
    """A top-level function of a file: its parameters and whether it can be threaded."""

    name: str
    params: tuple[str, ...]  # positional-or-keyword, in order
    kwonly: tuple[str, ...]
    threadable: bool
    batch_stepped: frozenset[str] = frozenset()  # parameters it calls `.step()` on inside a loop
    is_class: bool = False  # a class: `params` are its __init__'s, the keyword goes there


@dataclass
class Call:
    """A call in one file to a function of another file of the run."""

    spelling: str  # the callee as written: `engine.train_fn`, `tf`
    target: tuple[str, str]  # (path of the defining file, function name)
    args: tuple[str | None, ...]  # positional arguments as names (None for other expressions)
    keywords: tuple[tuple[str, str | None], ...]
    has_star: bool


@dataclass
class FileIndex:
    path: str
    functions: dict[str, Function] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    values: set[tuple[str, str]] = field(default_factory=set)  # run functions used as values here
    local_uses: set[str] = field(default_factory=set)  # names of own functions read in this file
    words: set[str] = field(default_factory=set)  # every identifier the file mentions


_IMPORT_LINE = re.compile(rb"^[ \t]*(?:from[ \t]+\.*[\w.]*[ \t]+import|import[ \t])[^\n]*", re.MULTILINE)


def linked(sources: dict[str, bytes]) -> set[str]:
    """The files that may import another file of the run, and the files they may import:
    a textual look at import lines, cheap enough for every run (a run of 300 files that do
    not import each other parses none of them). Conservative: `import m`/`from m import ...`
    in a file links it to the run's `m.py` or package `m/` in its folder or a folder above
    (up to the run's root, where Python would look); a relative import links it to every
    file under the package it climbs to."""
    absolute = {p: os.path.abspath(p) for p in sources}
    root = os.path.commonpath([os.path.dirname(a) for a in absolute.values()])
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
                firsts = {m.strip().split(b".")[0].split()[0] for m in modules if m.strip()}
                folders = _folders(os.path.dirname(absolute[path]), root)
                hits = {other for f in folders for word in firsts for other in tops.get((f, word), ()) if other != path}
            if hits:
                out |= hits | {path}
    return out


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
    root = os.path.commonpath([os.path.dirname(a) for a in run]) if run else ""
    out = {}
    for path, tree in trees.items():
        out[path] = _index_file(path, tree, run, root)
    for path, tree in trees.items():
        out[path].functions = _functions(tree)
    return out


def _functions(tree: ast.Module) -> dict[str, Function]:
    seen: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            seen[node.name] = seen.get(node.name, 0) + 1
    bases = {b.id for n in ast.walk(tree) if isinstance(n, ast.ClassDef) for b in n.bases if isinstance(b, ast.Name)}
    out = {}
    for node in tree.body:
        init = _init_of(node) if isinstance(node, ast.ClassDef) and node.name not in bases else None
        function = node if isinstance(node, ast.FunctionDef) else init
        if function is None:
            continue
        a = function.args
        params = tuple(p.arg for p in [*a.posonlyargs, *a.args])[1 if init else 0:]  # a class: __init__ less self
        kwonly = tuple(p.arg for p in a.kwonlyargs)
        ok = (
            seen.get(node.name) == 1 and a.kwarg is None and not node.decorator_list
            and ACCELERATOR not in params + kwonly and not a.posonlyargs and _trains(node)
        )
        out[node.name] = Function(node.name, params, kwonly, ok, _stepped_in_loops(node, set(params + kwonly)), init is not None)
    return out


def _init_of(cls: ast.ClassDef) -> ast.FunctionDef | None:
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
    """A backward call or a loop: the facts that make AM913 speak (the engine migration
    decides the rest; a function it leaves alone is dropped)."""
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward":
            return True
        if isinstance(node, ast.For):
            return True
    return False


def _resolve(module: str, level: int, path: str, run: dict[str, str], root: str) -> str | None:
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
    return None


def _index_file(path: str, tree: ast.Module, run: dict[str, str], root: str) -> FileIndex:
    result = FileIndex(path)
    modules, functions = _imported(path, tree, run, root)
    called: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            target, spelling = _target(node.func, modules, functions)
            if target is not None:
                called.add(id(node.func))
                result.calls.append(Call(
                    spelling, target,
                    tuple(a.id if isinstance(a, ast.Name) else None for a in node.args if not isinstance(a, ast.Starred)),
                    tuple((k.arg, k.value.id if isinstance(k.value, ast.Name) else None) for k in node.keywords if k.arg),
                    any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords),
                ))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and id(node) not in called:
            target, _ = _target(node, modules, functions)
            if target is not None:
                result.values.add(target)
        if isinstance(node, ast.Name) and id(node) not in called:
            result.local_uses.add(node.id)
        if isinstance(node, ast.Name):
            result.words.add(node.id)
        elif isinstance(node, ast.Attribute):
            result.words.add(node.attr)
        elif isinstance(node, ast.alias):
            result.words.update({node.name.split(".")[-1], node.asname or ""})
    return result


def _imported(path: str, tree: ast.Module, run: dict[str, str], root: str):
    """What the module-level imports of `path` bind to files of the run: local name →
    module file, and local name → (file, function); names bound again elsewhere left out."""
    modules: dict[str, str] = {}  # local name → file (a module of the run)
    functions: dict[str, tuple[str, str]] = {}  # local name → (file, function)
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, 0, path, run, root)
                if target is not None and (alias.asname or "." not in alias.name):
                    modules[alias.asname or alias.name] = target
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                local = alias.asname or alias.name
                sub = f"{node.module}.{alias.name}" if node.module else alias.name
                as_module = _resolve(sub, node.level, path, run, root)
                if as_module is not None:
                    modules[local] = as_module
                    continue
                owner = _resolve(node.module or "", node.level, path, run, root)
                if owner is not None and owner != path:
                    functions[local] = (owner, alias.name)
    bound = _bound_elsewhere(tree)
    modules = {k: v for k, v in modules.items() if k not in bound and v != path}
    functions = {k: v for k, v in functions.items() if k not in bound}
    return modules, functions


def _target(func: ast.AST, modules: dict[str, str], functions: dict[str, tuple[str, str]]):
    if isinstance(func, ast.Name) and func.id in functions:
        return functions[func.id], func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in modules:
        return (modules[func.value.id], func.attr), f"{func.value.id}.{func.attr}"
    return None, None


def _bound_elsewhere(tree: ast.Module) -> set[str]:
    """Names bound by anything but a module-level import: such a name may not be the module."""
    top_imports = {id(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top_imports:
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    return names


def candidates(files: dict[str, FileIndex], outside: dict[str, str] | None = None) -> set[tuple[str, str]]:
    """Functions that may be threaded: called from another file of the run, threadable,
    never used as a value in the run, not named by a file of the run through a route the
    index does not follow (a re-export), nor by a file beside the run's files that is not
    in it (`outside`: path → text; a caller we would not update), and not in a file that
    itself calls a threaded one."""
    used_as_value = set().union(*(f.values for f in files.values())) if files else set()
    out = set()
    for f in files.values():
        for call in f.calls:
            owner = files.get(call.target[0])
            function = owner.functions.get(call.target[1]) if owner else None
            if function is None or not function.threadable or call.target in used_as_value or call.has_star:
                continue
            if call.target[1] in owner.local_uses:
                continue  # the engine calls or passes it itself: AM002's single-file case, not this one
            if any(k == ACCELERATOR for k, _ in call.keywords):
                continue
            out.add(call.target)
    out = {t for t in out if not _unfollowed(files, t) and not _named_outside(outside or {}, t)}
    callers = {f.path for f in files.values() for c in f.calls if c.target in out}
    return {t for t in out if t[0] not in callers}


def _unfollowed(files: dict[str, FileIndex], target: tuple[str, str]) -> bool:
    """A file of the run (not the engine) names the function but has no call the index
    resolved to it: it may reach it some other way (`from pkg import train_fn`, re-exported)."""
    for f in files.values():
        if f.path != target[0] and target[1] in f.words and not any(c.target == target for c in f.calls):
            return True
    return False


def _named_outside(outside: dict[str, str], target: tuple[str, str]) -> bool:
    stem = os.path.splitext(os.path.basename(target[0]))[0]
    if stem == "__init__":
        stem = os.path.basename(os.path.dirname(target[0]))
    pattern = re.compile(rf"\b{re.escape(target[1])}\b")
    return any(stem in text and pattern.search(text) for text in outside.values())


@dataclass(frozen=True)
class Outcome:
    """What the run decided: the functions threaded, and each file's context."""

    threaded: frozenset[tuple[str, str]]
    calls: dict[str, tuple[str, ...]]  # caller path → spellings that pass the Accelerator
    stubs: dict[str, str]  # engine path → its callers' stub
    stepped: dict[str, tuple[str, ...]] = field(default_factory=dict)  # caller path → schedulers stepped per batch

    def context(self, path: str) -> tuple[tuple[str, ...], str, tuple[str, ...]]:
        """(calls, stub, stepped) for `path`: what `migrate` was given for it."""
        return self.calls.get(path, ()), self.stubs.get(path, ""), self.stepped.get(path, ())


def decide(
    files: dict[str, FileIndex],
    migrate: Callable[[str, tuple[str, ...], str, tuple[str, ...]], FileResult],
    target_import: Callable[[str], str],
    outside: dict[str, str] | None = None,
) -> tuple[Outcome, dict[str, FileResult]]:
    """Run the callers and engines with the threaded set until nothing is dropped.
    `migrate(path, calls, stub, stepped)` migrates one file with that context (the stub
    already cut off again; `stepped`: its schedulers the threaded functions step per batch).
    Returns the outcome and the results of the files that had a context."""
    threaded = candidates(files, outside)
    for _ in range(_ROUNDS):
        if not threaded:
            return Outcome(frozenset(), {}, {}), {}
        results: dict[str, FileResult] = {}
        dropped: set[tuple[str, str]] = set()
        calls = _calls_by_file(files, threaded)
        stepped: dict[str, tuple[str, ...]] = {}
        prepared: dict[tuple[str, str], list[dict[str, str]]] = {}
        for path, spellings in calls.items():
            stepped[path] = _stepped_by(files, files[path], threaded)
            result = migrate(path, spellings, "", stepped[path])
            results[path] = result
            dropped |= _check_caller(files[path], threaded, result, prepared)
        threaded -= dropped
        if dropped:
            continue
        stubs = {}
        for engine in sorted({t[0] for t in threaded}):
            mine = sorted(t for t in threaded if t[0] == engine)
            stub, left_out = _stub(files, mine, prepared, target_import(engine))
            dropped |= left_out
            if stub is None or left_out:
                continue  # the callers are migrated again without what was left out
            stubs[engine] = stub
            result = migrate(engine, (), stub, ())
            bad = _check_engine(mine, result)
            if not bad:  # the functions left alone keep the AM913 advice they get alone
                result = with_unthreaded(result, migrate(engine, (), "", ()), {t[1] for t in mine})
            results[engine] = result
            dropped |= bad
        threaded -= dropped
        if not dropped:
            return Outcome(frozenset(threaded), calls, stubs, stepped), results
    return Outcome(frozenset(), {}, {}), {}


def _stepped_by(files: dict[str, FileIndex], f: FileIndex, threaded) -> tuple[str, ...]:
    """Names this caller hands to a threaded function that steps them per batch."""
    out = set()
    for call in f.calls:
        if call.target not in threaded:
            continue
        function = files[call.target[0]].functions[call.target[1]]
        given = list(zip(function.params, call.args)) + list(call.keywords)
        out |= {name for param, name in given if name and param in function.batch_stepped}
    return tuple(sorted(out))


def _calls_by_file(files: dict[str, FileIndex], threaded: set[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    out = {}
    for path, f in files.items():
        spellings = sorted({c.spelling for c in f.calls if c.target in threaded})
        if spellings:
            out[path] = tuple(spellings)
    return out


def _check_caller(f: FileIndex, threaded, result: FileResult, prepared) -> set[tuple[str, str]]:
    """The threaded functions this caller does not pass the Accelerator to at every call
    (all of them when the result failed or was not migrated). Fills `prepared` with what
    each call passes: parameter → "prepared" / "device" / "other"."""
    mine = {c.target for c in f.calls if c.target in threaded}
    if result.status is not FileStatus.CHANGED or result.after is None or any(x.code.startswith("AM95") for x in result.findings):
        return mine
    try:
        tree = ast.parse(result.after)
    except SyntaxError:
        return mine
    roles = _roles(result.after)
    spelled = {c.spelling: c.target for c in f.calls if c.target in threaded}
    dropped, found = set(), set()
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    flat = _prepared_names(ast.walk(tree))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        spelling = _spelling(node.func)
        if spelling not in spelled:
            continue
        target = spelled[spelling]
        if not any(k.arg == ACCELERATOR for k in node.keywords):
            dropped.add(target)
            continue
        found.add(target)
        prepared.setdefault(target, []).append(_kinds(node, _Scopes(node, parents, flat), roles))
    return dropped | (mine - found)


def _spelling(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return None


class _Scopes:
    """What a name passed at `call` is, looked up from the call's own function outwards:
    the innermost scope that binds it decides (a `loader` prepared in `main()` is not the
    `loader` another function builds for itself)."""

    def __init__(self, call: ast.Call, parents: dict[int, ast.AST], flat: tuple[set[str], set[str]]) -> None:
        self.flat = flat  # for a parameter: what the name is where the file prepares it
        self.chain = []
        node = parents.get(id(call))
        while node is not None:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                self.chain.append(node)
            node = parents.get(id(node))

    def kind(self, name: str) -> str | None:
        for scope in self.chain:
            own = list(_own_nodes(scope))
            prepared, devices = _prepared_names(own)
            if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in own):
                return "prepared" if name in prepared else "device" if name in devices else "other"
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and name in {
                a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg)
            }:
                prepared, devices = self.flat  # passed in (AM002 threads such helpers from the set-up)
                return "prepared" if name in prepared else "device" if name in devices else "other"
        return None


def _own_nodes(scope: ast.AST):
    """The nodes of `scope`'s body, not those of functions or classes nested in it."""
    stack = list(scope.body) if hasattr(scope, "body") else []
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _prepared_names(nodes) -> tuple[set[str], set[str]]:
    """Names bound from `accelerator.prepare(...)`, and names bound to `accelerator.device`."""
    prepared, devices = set(), set()
    for node in nodes:
        if not isinstance(node, ast.Assign):
            continue
        targets = [e for t in node.targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "prepare":
            prepared.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(value, ast.Attribute) and value.attr == "device" and _spelling(value.value) == ACCELERATOR:
            devices.update(t.id for t in targets if isinstance(t, ast.Name))
    return prepared, devices


def _roles(text: str) -> dict[str, str]:
    """The roles the caller's own analysis gives its names (model, optimizer, ...)."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper

    from migrator.analysis import analyze

    analysis = analyze(MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True))
    return {name: role.name.lower() for name, role in analysis.roles.roles.items()}


# What the stub binds a prepared parameter to, by its role in the caller, so the engine's
# analysis gives the parameter the same role (never run: the stub is cut off).
_STAND_INS = {
    "model": "torch.nn.Module()",
    "optimizer": "torch.optim.SGD([], lr=0.0)",
    "dataloader": "torch.utils.data.DataLoader([])",
    "scheduler": "torch.optim.lr_scheduler.LambdaLR(None, None)",
}


def _kinds(call: ast.Call, scopes: _Scopes, roles: dict[str, str]) -> dict[object, str]:
    def kind(value: ast.AST) -> str:
        if isinstance(value, ast.Attribute) and value.attr == "device" and _spelling(value.value) == ACCELERATOR:
            return "device"
        found = scopes.kind(value.id) if isinstance(value, ast.Name) else None
        if found == "prepared":
            return f"prepared:{roles.get(value.id, '')}"
        return found if found == "device" else "other"

    out: dict[object, str] = {i: kind(a) for i, a in enumerate(call.args)}
    out.update({k.arg: kind(k.value) for k in call.keywords if k.arg and k.arg != ACCELERATOR})
    return out


def _stub(files, mine, prepared, target_import: str) -> tuple[str | None, set[tuple[str, str]]]:
    """The callers of `mine` as one function: the Accelerator, `device = accelerator.device`
    where the callers pass its device, one prepare() of what they pass prepared, then one
    call per function; and the functions left out of it. The engine's analysis knows names,
    not scopes, so a function is left out when a parameter name would mean two things (a
    `loader` prepared at one call and not at another, here or in a function taken before)."""
    engine = files[mine[0][0]]
    kinds: dict[str, str] = {}
    lines = []
    left_out = set()
    mapped_all = {t: _parameter_kinds(engine.functions[t[1]], prepared.get(t, [])) for t in mine}
    # the function handed the most prepared objects first (the training one): its names win
    order = sorted(mine, key=lambda t: (-sum(k.startswith("prepared:") for k in (mapped_all[t] or {}).values()), t))
    for target in order:
        function = engine.functions[target[1]]
        mapped = mapped_all[target]
        if mapped is None or any(kinds.get(p, k) != k for p, k in mapped.items()) or ({ACCELERATOR, "torch", "Accelerator", STUB} & set(mapped)):
            left_out.add(target)
            continue
        args = [p for p in function.params if p in mapped] + [f"{p}={p}" for p in function.kwonly if p in mapped]
        missing = [p for p in function.params if p not in mapped]
        if missing and any(function.params.index(p) < len(args) for p in missing):
            left_out.add(target)  # an argument the callers leave to its default sits between given ones
            continue
        kinds.update(mapped)
        lines.append(f"    {target[1]}({', '.join(args)})\n")
    if not lines:
        return None, left_out
    params = sorted(kinds)
    head = [f"def {STUB}({', '.join(p for p in params if kinds[p] == 'other')}):\n",
            "    import torch\n",
            f"    from {target_import} import Accelerator\n",
            f"    {ACCELERATOR} = Accelerator()\n"]
    head += [f"    {p} = {ACCELERATOR}.device\n" for p in params if kinds[p] == "device"]
    ready = [p for p in params if kinds[p].startswith("prepared:")]
    head += [f"    {p} = {_STAND_INS.get(kinds[p].partition(':')[2], 'object()')}\n" for p in ready]
    if ready:
        targets = ", ".join(ready) + ("," if len(ready) == 1 else "")
        head.append(f"    {targets} = {ACCELERATOR}.prepare({', '.join(ready)})\n")
    return "".join(head + lines), left_out


def _parameter_kinds(function: Function, calls: list[dict[object, str]]) -> dict[str, str] | None:
    """Parameter → what every call passes it; None when calls disagree or overflow."""
    kinds: dict[str, str] = {}
    for call in calls:
        for key, kind in call.items():
            if isinstance(key, int):
                if key >= len(function.params):
                    return None
                key = function.params[key]
            if kinds.setdefault(key, kind) != kind:
                return None
    return kinds


def _check_engine(mine, result: FileResult) -> set[tuple[str, str]]:
    """The functions of `mine` the engine's migration did not give the keyword-only
    parameter; all of them when it changed another function or class of the file (the
    stub's prepare() speaks for the threaded functions only: a `.to(device)` removed from a
    function the set-up does not reach would leave its batches off the device)."""
    if result.status is not FileStatus.CHANGED or result.after is None or any(x.code.startswith("AM95") for x in result.findings):
        return set(mine)
    try:
        tree = ast.parse(result.after)
        before = ast.parse(result.before or "")
    except SyntaxError:
        return set(mine)
    names = {t[1] for t in mine}
    if _others(before, names) != _others(tree, names):
        return set(mine)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    defs |= {n.name: init for n in tree.body if isinstance(n, ast.ClassDef) and (init := _init_of(n)) is not None}
    return {t for t in mine if t[1] not in defs or ACCELERATOR not in [a.arg for a in defs[t[1]].args.kwonlyargs]}


def with_unthreaded(result: FileResult, alone: FileResult, threaded: set[str]) -> FileResult:
    """`result` (the engine migrated with its callers) plus the AM913 findings the engine
    alone gives in the functions that were not threaded, moved to where those functions
    are now (they are unchanged; code above them may have moved)."""
    from dataclasses import replace

    from migrator.findings import Position

    try:
        before, after = ast.parse(result.before or ""), ast.parse(result.after or "")
    except SyntaxError:
        return result
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    spans = {n.name: (n.lineno, n.end_lineno or n.lineno) for n in before.body if isinstance(n, kinds) and n.name not in threaded}
    now = {n.name: n.lineno for n in after.body if isinstance(n, kinds)}
    extra = []
    for f in alone.findings:
        name = next((k for k, (a, b) in spans.items() if f.code == "AM913" and a <= f.start.line <= b and k in now), None)
        if name is not None:
            shift = now[name] - spans[name][0]
            extra.append(replace(
                f, start=Position(f.start.line + shift, f.start.col), end=Position(f.end.line + shift, f.end.col)
            ))
    return replace(result, findings=result.findings + tuple(extra)) if extra else result


def _others(tree: ast.Module, names: set[str]) -> list[str]:
    """The module's statements but its imports and the definitions named in `names`, as
    text to compare."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [
        ast.dump(n) for n in tree.body
        if not isinstance(n, (ast.Import, ast.ImportFrom)) and not (isinstance(n, kinds) and n.name in names)
    ]


def with_stub(text: str, stub: str) -> str:
    """The engine's text with its callers' stub appended (no line of `text` moves)."""
    return text + ("" if text.endswith("\n") else "\n") + SEPARATOR + stub


def without_stub(result: FileResult, text: str) -> FileResult | None:
    """The engine's result with the stub cut off again, findings on its lines dropped;
    None when the stub is not where it was put (the migration moved code around it)."""
    from dataclasses import replace

    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    after = result.after
    if after is None:
        return None
    at = after.rfind(SEPARATOR + f"def {STUB}(")
    if at < 0:
        return None
    after = after[:at] + ("" if text.endswith("\n") else "")
    if not text.endswith("\n") and after.endswith("\n"):
        after = after[:-1]
    findings = tuple(f for f in result.findings if f.start.line <= lines)
    touched = frozenset(n for n in result.touched_lines if n <= lines)
    status = FileStatus.CHANGED if after != text else FileStatus.UNCHANGED
    return replace(result, before=text, after=after, findings=findings, touched_lines=touched, status=status)
