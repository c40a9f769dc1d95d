"""Data sets of the run that download themselves, reached through several of its files.

deep-person-reid's main.py builds `torchreid.data.ImageDataManager(...)`, whose
`__init__` calls `init_image_dataset(name, ...)` (datasets/__init__.py), which picks
`Market1501` from a table (`__image_datasets[name](**kwargs)`), whose `__init__` calls
`self.download_dataset(...)`, which fetches and unpacks an archive. open-reid's
`datasets.create(name, root)` does the same through `CUHK03(root, download=True)`. On N
processes every one downloads and unpacks into the same folder, and one that finds the
folder another has just made skips the download and fails its own check of the files:
the call in the set-up is named (AM220, under `main_process_first()`).

Read with `ast` from the run's files: a function or class downloads when its body (a
class: its `__init__`) fetches a file itself, calls a method of its own named for
downloading (`self.download()`, `self._download_data()`) outside a test of a parameter
that defaults to False, or calls one of the run's functions or classes that downloads,
also one picked from a table of them, a few calls deep.
"""

from __future__ import annotations

import ast
import os

from migrator.analysis.ast_imports import module_imports, qualify
from migrator.project.index import FileIndex, _defined_in, _imported, _tables, chain, init_of, parameter_defaults, run_root

# what fetches a file from the network (torchvision's and the weights' are downloads.py's)
_FETCHES = {
    "urllib.request.urlretrieve", "urllib.urlretrieve", "wget.download", "gdown.download", "gdown.cached_download",
    "torch.hub.download_url_to_file", "torch.utils.model_zoo.load_url", "urllib.request.urlopen",
}
_DEPTH = 6


def deep_downloaders(sources: dict[str, bytes], files: dict[str, FileIndex], targets: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Of `targets` (file, function or class of the run), those that download, reading
    through the run's files."""
    if not targets:
        return set()
    reader = _Reader(sources, files)
    return {t for t in targets if reader.downloads(t)}


def random_draws(sources: dict[str, bytes], files: dict[str, FileIndex], targets: set[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, int]]:
    """Of `targets` (downloading functions and classes of the run), where each first draws
    from a global random generator while it runs, reading through the run's files."""
    reader = _Reader(sources, files) if targets else None
    return {t: found for t in targets if reader is not None and (found := reader.draws(t)) is not None}


class _Reader:
    """The run's files parsed once, and what each function or class is found to do."""

    def __init__(self, sources: dict[str, bytes], files: dict[str, FileIndex]) -> None:
        self.files = files
        self.trees = {path: tree for path in files if (tree := _parse(sources.get(path))) is not None}
        self.run = {os.path.abspath(p): p for p in files}
        self.root = run_root(self.run) if self.run else ""
        self.memo: dict[tuple[str, str], bool] = {}
        self.names: dict[str, tuple[set[str], dict[str, tuple[str, str]], dict]] = {}

    def downloads(self, target: tuple[str, str], depth: int = 0) -> bool:
        if target in self.memo:
            return self.memo[target]
        self.memo[target] = False  # a cycle reads as no download
        tree = self.trees.get(target[0])
        bodies = _bodies(tree, target[1]) if tree is not None else []
        found = False
        if bodies and depth <= _DEPTH:
            imports = module_imports(tree)
            found = any(
                qualify(call.func, imports) in _FETCHES or _own_download(call)
                or any(self.downloads(t, depth + 1) for t in self.callees(target[0], call) if t != target)
                for body in bodies for call in _unguarded_calls(body)
            )
        self.memo[target] = found
        return found

    def draws(self, target: tuple[str, str], depth: int = 0, seen: set | None = None) -> tuple[str, int] | None:
        """Where making `target` first draws from a global random generator (viper's
        `pids = np.random.permutation(num)` in the `download()` its `__init__` calls),
        through its own methods and the run's functions it calls: (file, line), or None."""
        seen = set() if seen is None else seen
        tree = self.trees.get(target[0])
        if target in seen or tree is None or depth > _DEPTH:
            return None
        seen.add(target)
        imports = module_imports(tree)
        for body in _bodies(tree, target[1]):
            for call in _calls_found_missing(body):
                if _global_draw(qualify(call.func, imports), call):
                    return target[0], call.lineno
            for call in _unguarded_calls(body):
                for callee in self.callees(target[0], call):
                    if callee != target and (found := self.draws(callee, depth + 1, seen)) is not None:
                        return found
        return None

    def callees(self, path: str, call: ast.Call) -> list[tuple[str, str]]:
        """What a call in `path` runs, among the run's functions and classes: by name, as
        the index resolved it, or each entry of a table it picks from."""
        tree = self.trees[path]
        names = [chain(call.func) or ""]
        if isinstance(call.func, ast.Subscript) and isinstance(call.func.value, ast.Name):
            names = list(_tables(tree).get(call.func.value.id, ()))
        own, spelled, imported = self.names_of(path)
        out = []
        for name in names:
            if name in own:
                out.append((path, name))
            elif name in spelled:
                out.append(spelled[name])
            elif name in imported:
                out.append(_defined_in(*imported[name], self.run, self.root, self.trees))
        return [t for t in out if t[0] in self.files]

    def names_of(self, path: str) -> tuple[set[str], dict[str, tuple[str, str]], dict]:
        """Its own top-level functions and classes, its calls the index resolved, and the
        functions its imports bind: read once per file."""
        if path not in self.names:
            tree = self.trees[path]
            own = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            spelled = {c.spelling: c.target for c in self.files[path].calls}
            imported = _imported(path, tree, self.run, self.root, self.trees)[1]
            self.names[path] = (own, spelled, imported)
        return self.names[path]


def _parse(data: bytes | None) -> ast.Module | None:
    try:
        return ast.parse(data) if data is not None else None
    except (SyntaxError, ValueError):
        return None


def _body(tree: ast.Module, name: str) -> ast.AST | None:
    """The function `name`, or the `__init__` of the class `name`, at the module's top; for
    `Class.method`, that method (a class method called on the class)."""
    owner, _, method = name.partition(".")
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
        if isinstance(node, ast.ClassDef) and node.name == owner:
            if not method:
                return init_of(node)
            return next((m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == method), None)
    return None


def _bodies(tree: ast.Module, name: str) -> list[ast.AST]:
    """The function `name`; for a class, its `__init__` and the methods it calls on `self`,
    however far (`self.download()`, then `self._split()` there)."""
    body = _body(tree, name)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name.partition(".")[0]), None)
    if body is None or cls is None:
        return [body] if body is not None else []
    methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
    out, todo = [], [body]
    while todo:
        function = todo.pop()
        if function in out:
            continue
        out.append(function)
        for call in _unguarded_calls(function):
            func = call.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls") and func.attr in methods:
                todo.append(methods[func.attr])
    return out


# what tests for files already there (`osp.exists(path)`, torchvision's `self._check_integrity()`)
_CHECKS = ("exists", "isfile", "isdir", "check_integrity", "check_exists", "check_before_run")


def _calls_found_missing(function: ast.AST) -> list[ast.Call]:
    """The calls that run only when a test finds the files missing: under `if not
    osp.exists(split_path):` (either branch of such a test: the code takes one or the
    other by what is on disk), or after `if self._check_integrity(): return`. Those are
    the calls a process runs or skips by whether another made the files first; the rest
    runs alike on every process."""
    out: list[ast.Call] = []

    def checks(test: ast.AST) -> bool:
        return any(isinstance(n, ast.Call) and (chain(n.func) or "").lstrip("_").rsplit(".", 1)[-1].lstrip("_") in _CHECKS for n in ast.walk(test))

    def walk(statements: list[ast.stmt], found_missing: bool) -> None:
        for statement in statements:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(statement, ast.If) and checks(statement.test):
                walk(statement.body, True)
                walk(statement.orelse, True)
                if statement.body and isinstance(statement.body[-1], ast.Return):
                    found_missing = True  # `if done: return`: what follows runs on a first run only
                continue
            if found_missing:
                out.extend(n for n in ast.walk(statement) if isinstance(n, ast.Call))
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(statement, field, None)
                if isinstance(inner, list) and not found_missing:
                    walk([s for s in inner if isinstance(s, ast.stmt)] + [s for h in inner if isinstance(h, ast.ExceptHandler) for s in h.body], False)

    walk(getattr(function, "body", []), False)
    return out


# the global generators' own set-up, not draws
_NOT_DRAWS = {"seed", "RandomState", "default_rng", "Generator", "Random", "SystemRandom", "get_state", "set_state", "getstate", "setstate"}
_TORCH_DRAWS = {"rand", "randn", "randint", "randperm", "bernoulli", "multinomial", "normal"}


def _global_draw(qualified: str, call: ast.Call) -> bool:
    """`np.random.permutation(n)`, `random.shuffle(ids)`, `torch.randperm(n)` (no generator
    of its own): a draw that moves the process's global generator on."""
    module, _, name = qualified.rpartition(".")
    if name in _NOT_DRAWS or any(k.arg == "generator" for k in call.keywords):
        return False
    return module in ("numpy.random", "random") or module == "torch" and name in _TORCH_DRAWS


def _own_download(call: ast.Call) -> bool:
    """`self.download()`, `self.download_dataset(dir, url)`, `self._download()`, and in a
    class method `cls.download_or_unzip(root)`."""
    func = call.func
    return (
        isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls")
        and func.attr.lstrip("_").startswith("download")
    )


def _unguarded_calls(function: ast.AST) -> list[ast.Call]:
    """The calls of `function`, less those under `if flag:` where `flag` is a parameter
    defaulting to False or None (`download=False`: only a caller passing True downloads)."""
    off = _off_by_default(function)
    out: list[ast.Call] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and isinstance(child.test, ast.Name) and child.test.id in off:
                for other in child.orelse:
                    walk(other)
                continue
            if isinstance(child, ast.Call):
                out.append(child)
            walk(child)

    walk(function)
    return out


def _off_by_default(function: ast.AST) -> set[str]:
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    return {name for name, d in parameter_defaults(function).items() if isinstance(d, ast.Constant) and d.value in (False, None)}
