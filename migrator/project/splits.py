"""Helpers of the run that split a data set at random with the global generators.

SR-GNN's `split_validation(train_set, valid_portion)` (utils.py) shuffles the sample
indices with `np.random.shuffle` and returns the training part and the held-out part;
main.py calls it under `--validation`. Under the launcher each process draws its own
order, so one process validates on samples another trains on. AM227 names a library
split (`random_split` without a generator); with `Config.project_splits` it names the
call of such a helper too, unless the generator it draws from is seeded alike first.
Read with `ast`: a function counts when it draws a permutation from a global generator,
seeds nothing itself, cuts at one place (`[:k]` and `[k:]`) and returns two or more parts.
"""

from __future__ import annotations

import ast

from migrator.analysis.ast_imports import qualify
from migrator.project.index import FileIndex, trees_mentioning

# the draws of a permutation from a global generator → the seeds that make it alike
_DRAWS = {
    "numpy.random.shuffle": "numpy.random.seed", "numpy.random.permutation": "numpy.random.seed",
    "random.shuffle": "random.seed", "random.sample": "random.seed", "torch.randperm": "torch.manual_seed",
}
_SEEDS = {"numpy.random.seed", "random.seed", "torch.manual_seed", "torch.random.manual_seed"}


def split_helper_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, str, str], ...]]:
    """For each file of the run: its calls of another file's functions that split data at
    random, as (spelling, the draw as written there, the seed that makes it alike)."""
    splitters: dict[tuple[str, str], tuple[str, str]] = {}
    for path, tree, imports in trees_mentioning(sources, files, (b"shuffle", b"perm", b"sample")):
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and (found := _splits(node, imports)) is not None:
                splitters[(path, node.name)] = found
    out: dict[str, set[tuple[str, str, str]]] = {}
    for path, f in files.items():
        for call in f.calls:
            if call.target in splitters and call.target[0] != path:
                out.setdefault(path, set()).add((call.spelling, *splitters[call.target]))
    return {path: tuple(sorted(calls)) for path, calls in out.items()}


def _splits(function: ast.FunctionDef, imports: dict[str, str]) -> tuple[str, str] | None:
    """(the draw, its seed) when `function` permutes with a global generator, seeds none,
    and returns a tuple of two or more parts."""
    draw = None
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        name = qualify(node.func, imports)
        if name in _SEEDS:
            return None
        if name in _DRAWS and draw is None and not any(k.arg in ("generator", "random_state") for k in node.keywords):
            draw = (f"{ast.unparse(node.func)}()", _DRAWS[name])
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return) and n.value is not None]
    if draw is None or not returns or not all(isinstance(r.value, ast.Tuple) and len(r.value.elts) >= 2 for r in returns):
        return None
    return draw if _cut_in_two(function) else None


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
