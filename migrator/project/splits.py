"""Helpers of the run that split a data set at random with the global generators.

SR-GNN's `split_validation(train_set, valid_portion)` (utils.py) shuffles the sample
indices with `np.random.shuffle` and returns the training part and the held-out part;
main.py calls it under `--validation`. Under the launcher each process draws its own
order, so one process validates on samples another trains on. AM227 names a library
split (`random_split` without a generator); with `Config.project_splits` it names the
call of such a helper too, unless the generator it draws from is seeded alike first.
Read with `ast`: a function, or a method called on an instance of the run's class,
counts when it draws a permutation from a global generator, seeds nothing itself (or
only with an optional parameter the call leaves to None: lonePatient/Bert's
`TaskData.train_val_split`, `random.seed(seed)` with `seed=None`), cuts at one place
(`[:k]` and `[k:]`) and returns two or more parts.
"""

from __future__ import annotations

import ast

from migrator.analysis.ast_imports import qualify
from migrator.analysis.random_draws import SEED_ALL
from migrator.project.entries import instance_method_calls
from migrator.project.index import FileIndex, class_method_calls, parameter_defaults, trees_mentioning

# the draws of a permutation from a global generator → the seeds that make it alike
_DRAWS = {
    "numpy.random.shuffle": "numpy.random.seed", "numpy.random.permutation": "numpy.random.seed",
    "random.shuffle": "random.seed", "random.sample": "random.seed", "torch.randperm": "torch.manual_seed",
}
_SEEDS = {"numpy.random.seed", "random.seed", "torch.manual_seed", "torch.random.manual_seed"}


def seeded_by_callers(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file of the run whose code other files call: the global generators those
    files seed, the same on every process (no rank in the arguments), as the seeds'
    qualified names. ClusterGCN's clustering.py splits with scikit-learn's
    `train_test_split`, drawn from NumPy's generator, while main.py, its caller, seeds only
    torch: AM227 names such a split unless a caller seeds it (`Config.project_seeded`)."""
    seeds = {path: _seeds_called(tree, imports) for path, tree, imports in trees_mentioning(sources, files, (b"seed",))}
    out: dict[str, set[str]] = {}
    for path, f in files.items():
        for call in f.calls:
            if call.target[0] != path and seeds.get(path):
                out.setdefault(call.target[0], set()).update(seeds[path])
    return {path: tuple(sorted(found)) for path, found in out.items()}


def _seeds_called(tree: ast.Module, imports: dict[str, str]) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or "rank" in ast.unparse(node).lower():
            continue
        name = qualify(node.func, imports)
        if name in _SEEDS:
            found.add(name)
        elif name in SEED_ALL:
            found |= _SEEDS
    return found


def split_helper_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, str, str, str, int], ...]]:
    """For each file of the run: its calls of another file's functions, or of methods of
    its classes on an instance (`data.train_val_split(...)` on `data = TaskData()`), that
    split data at random, as (spelling, the draw as written there, the seed that makes it
    alike, the optional parameter it seeds with or "", that parameter's place or -1)."""
    splitters: dict[tuple[str, str], tuple[str, str, str | None]] = {}
    for path, tree, imports in trees_mentioning(sources, files, (b"shuffle", b"perm", b"sample")):
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and (found := _splits(node, imports)) is not None:
                splitters[(path, node.name)] = found
            elif isinstance(node, ast.ClassDef):
                for method in node.body:
                    if isinstance(method, ast.FunctionDef) and (found := _splits(method, imports)) is not None:
                        splitters[(path, f"{node.name}.{method.name}")] = found
    if not splitters:
        return {}
    out: dict[str, set[tuple[str, str, str, str, int]]] = {}
    for path, f in files.items():
        calls = [(c.spelling, c.target) for c in f.calls if c.target[0] != path]
        calls += [
            (f"{name}.{method}", (made[0], f"{made[1]}.{method}"))
            for name, made, method in instance_method_calls(sources.get(path, b""), f, files) if made[0] != path
        ]
        calls += class_method_calls(sources.get(path, b""), path, set(splitters))
        for spelling, target in calls:
            if target in splitters:
                draw, seed, param = splitters[target]
                out.setdefault(path, set()).add((spelling, draw, seed, param or "", _position(param, target, files)))
    return {path: tuple(sorted(calls)) for path, calls in out.items()}


def _splits(function: ast.FunctionDef, imports: dict[str, str]) -> tuple[str, str, str | None] | None:
    """(the draw, its seed, the parameter it seeds with or None) when `function` permutes
    with a global generator, seeds it with nothing but an optional parameter left to None
    (`random.seed(seed)` with `seed=None`: from the system's entropy, differently on each
    process, unless the call passes one), and returns a tuple of two or more parts."""
    draw, param = None, None
    optional = _none_defaults(function)
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        name = qualify(node.func, imports)
        if name in _SEEDS:
            given = node.args[0] if node.args else None
            if not (isinstance(given, ast.Name) and given.id in optional):
                return None
            param = given.id
        if name in _DRAWS and draw is None and not any(k.arg in ("generator", "random_state") for k in node.keywords):
            draw = (f"{ast.unparse(node.func)}()", _DRAWS[name])
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return) and n.value is not None]
    if draw is None or not returns or not all(isinstance(r.value, ast.Tuple) and len(r.value.elts) >= 2 for r in returns):
        return None
    return (*draw, param) if _cut_in_two(function) else None


def _none_defaults(function: ast.FunctionDef) -> set[str]:
    """The parameters that default to None."""
    return {name for name, d in parameter_defaults(function).items() if isinstance(d, ast.Constant) and d.value is None}


def _position(param: str | None, target: tuple[str, str], files: dict[str, FileIndex]) -> int:
    """Where a call passes the seeding parameter by its place (self not counted), or -1."""
    owner = files.get(target[0])
    name, _, method = target[1].partition(".")
    function = owner.functions.get(name) if owner and param else None
    if function is None:
        return -1
    params = list(dict(function.methods).get(method, ())) if method else list(function.params)
    return params.index(param) if param in params else -1


def _cut_in_two(function: ast.FunctionDef) -> bool:
    """Slices `[:k]` and `[k:]` at the same `k` (`sidx[:n_train]`, `sidx[n_train:]`): the
    parts are disjoint, a split, not a batch shuffled with its labels."""
    uppers, lowers = set(), set()
    for node in ast.walk(function):
        if isinstance(node, ast.Slice) and node.step is None:
            if node.lower is None and node.upper is not None:
                uppers.add(ast.unparse(node.upper))
            elif node.upper is None and node.lower is not None:
                lowers.add(ast.unparse(node.lower))
    return bool(uppers & lowers)
