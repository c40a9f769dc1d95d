"""Calls of other files' functions that hand back DataLoaders sharded by hand.

Swin-Transformer's main.py takes `data_loader_train` from `build_loader(config)` of
data/build.py, which builds it with `sampler=DistributedSampler(dataset, num_replicas=...,
rank=...)`. Prepared in main.py, the loader is sharded a second time: each process reads
1/N² of the data, with no error (reader R1, nineteenth session). AM212 removes a sampler in
the file that prepares the loader; across files these calls let it name the builder, and
the verifier leave the caller as written while the loaders it prepares are sharded there.
"""

from __future__ import annotations

import ast

from migrator.project.index import FileIndex

_SAMPLER = "DistributedSampler"


def sharded_loader_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file: its calls (as spelled there) of other files' functions that return
    DataLoaders they build with a DistributedSampler."""
    sharding: dict[tuple[str, str], bool] = {}

    def shards(target: tuple[str, str], depth: int = 0) -> bool:
        if target not in sharding:
            sharding[target] = False  # a cycle of delegations shards nothing
            function = _function(sources.get(target[0], b""), target[1])
            sharding[target] = function is not None and (_shards(function) or depth < 3 and any(
                shards(t, depth + 1) for t in _delegates(function, target[0], files)
            ))
        return sharding[target]

    out = {}
    for path, f in files.items():
        found = {
            call.spelling for call in f.calls
            if call.target[0] != path and call.target[0] in files
            and files[call.target[0]].functions.get(call.target[1]) is not None and shards(call.target)
        }
        if found:
            out[path] = tuple(sorted(found))
    return out


def _function(source: bytes, name: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _delegates(function: ast.FunctionDef, path: str, files: dict[str, FileIndex]) -> set[tuple[str, str]]:
    """The run's functions whose call the function returns (Swin's `data/__init__.py`:
    `def build_loader(config, ...): return _build_loader(config)`, from `.build`; or a
    function of its own file)."""
    f = files.get(path)
    if f is None:
        return set()
    returned = {
        ast.unparse(n.value.func) for n in ast.walk(function)
        if isinstance(n, ast.Return) and isinstance(n.value, ast.Call)
    }
    own = {(path, name) for name in returned if name in f.functions}
    return own | {c.target for c in f.calls if c.spelling in returned and c.target[0] in files}


def _shards(function: ast.FunctionDef) -> bool:
    """A DataLoader built in the function with `sampler=` a DistributedSampler, inline or
    through a name bound to one (`sampler_train = DistributedSampler(...)`, also in one
    branch of an `if`), and returned."""
    if not _returns_something(function):
        return False
    samplers = {
        t.id for n in ast.walk(function) if isinstance(n, ast.Assign) and _SAMPLER in ast.unparse(n.value)
        for t in n.targets if isinstance(t, ast.Name)
    }
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and ast.unparse(node.func).rsplit(".", 1)[-1] == "DataLoader":
            for kw in node.keywords:
                if kw.arg == "sampler" and (
                    _SAMPLER in ast.unparse(kw.value) or isinstance(kw.value, ast.Name) and kw.value.id in samplers
                ):
                    return True
    return False


def _returns_something(function: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(function))
