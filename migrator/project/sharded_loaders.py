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
    return _calls(files, _Sharding(sources, files).returns)


def sharding_reader_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file: its calls of other files' functions that read loaders they get from
    such a builder themselves (lufficc/SSD's `do_evaluation(cfg, model, distributed=...)`
    calls `make_data_loader(cfg, is_train=False, distributed=distributed)`): each process
    reads its share, so they do not read their data whole."""
    return _calls(files, _Sharding(sources, files).reads)


def gathering_reader_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file: its calls of other files' functions that read loaders they shard
    themselves and gather what they compute across the processes (lufficc/SSD's
    `do_evaluation`: `inference(...)` → `_accumulate_predictions_from_multiple_gpus`, which
    calls `dist_util.all_gather`): a distributed evaluation whole already, which the
    Accelerator's default process group serves as it is."""
    sharding = _Sharding(sources, files)
    return _calls(files, lambda target: sharding.reads(target) and sharding.gathers(target))


def sharded_params(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file: the parameters of its functions that a caller in another file hands
    a loader such a builder made (lufficc/SSD's `do_train(cfg, model, train_loader, ...)`
    after `train_loader = make_data_loader(...)`): this process's share already, kept out
    of prepare() (analysis/plan.py: SHARDED), so a loop over it reads no whole data set."""
    builders = sharded_loader_calls(sources, files)
    out: dict[str, set[str]] = {}
    for path, spellings in builders.items():
        try:
            tree = ast.parse(sources.get(path, b""))
        except (SyntaxError, ValueError):
            continue
        values: dict[str, list[str | None]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                called = ast.unparse(node.value.func) if isinstance(node.value, ast.Call) else None
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        values.setdefault(target.id, []).append(called)
        bound = {name for name, called in values.items() if all(c in spellings for c in called)}
        targets = {c.spelling: c.target for c in files[path].calls if c.target[0] != path and c.target[0] in files}
        for node in ast.walk(tree):
            target = targets.get(ast.unparse(node.func)) if isinstance(node, ast.Call) else None
            function = files[target[0]].functions.get(target[1]) if target else None
            if function is None:
                continue
            given = list(zip(function.params, node.args)) + [(k.arg, k.value) for k in node.keywords if k.arg]
            found = {param for param, expr in given if isinstance(expr, ast.Name) and expr.id in bound}
            if found:
                out.setdefault(target[0], set()).update(found)
    return {path: tuple(sorted(names)) for path, names in out.items()}


def _calls(files: dict[str, FileIndex], test) -> dict[str, tuple[str, ...]]:
    out = {}
    for path, f in files.items():
        found = {
            call.spelling for call in f.calls
            if call.target[0] != path and call.target[0] in files
            and files[call.target[0]].functions.get(call.target[1]) is not None and test(call.target)
        }
        if found:
            out[path] = tuple(sorted(found))
    return out


class _Sharding:
    """Which functions of the run hand back, or read, loaders sharded by a DistributedSampler
    (each file parsed once, each answer computed once)."""

    def __init__(self, sources: dict[str, bytes], files: dict[str, FileIndex]) -> None:
        self.sources, self.files = sources, files
        self._trees: dict[str, ast.Module | None] = {}
        self._returns: dict[tuple[str, str], bool] = {}
        self._reads: dict[tuple[str, str], bool] = {}

    def returns(self, target: tuple[str, str], depth: int = 0) -> bool:
        if target not in self._returns:
            self._returns[target] = False  # a cycle of delegations shards nothing
            function = self._function(target)
            self._returns[target] = function is not None and (_shards(function) or depth < 3 and any(
                self.returns(t, depth + 1) for t in _delegates(function, target[0], self.files)
            ))
        return self._returns[target]

    def reads(self, target: tuple[str, str]) -> bool:
        if target not in self._reads:
            function, f = self._function(target), self.files.get(target[0])
            called = {ast.unparse(n.func) for n in ast.walk(function) if isinstance(n, ast.Call)} if function else set()
            self._reads[target] = f is not None and any(
                c.spelling in called and c.target[0] in self.files and self.returns(c.target) for c in f.calls
            )
        return self._reads[target]

    def gathers(self, target: tuple[str, str], depth: int = 0) -> bool:
        """The function, or one of the run's functions it calls (a few levels down), calls
        a gather or a reduction across the processes (`all_gather`, `dist.reduce`, ...)."""
        function, f = self._function(target), self.files.get(target[0])
        if function is None or f is None:
            return False
        called = {ast.unparse(n.func) for n in ast.walk(function) if isinstance(n, ast.Call)}
        if any(name.rsplit(".", 1)[-1] in _GATHERS for name in called):
            return True
        callees = {(target[0], name) for name in called if name in f.functions}
        callees |= {c.target for c in f.calls if c.spelling in called and c.target[0] in self.files}
        return depth < 3 and any(self.gathers(t, depth + 1) for t in callees - {target})

    def _function(self, target: tuple[str, str]) -> ast.FunctionDef | None:
        path, name = target
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(self.sources.get(path, b""))
            except (SyntaxError, ValueError):
                self._trees[path] = None
        tree = self._trees[path]
        return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None) if tree else None


_GATHERS = {"all_gather", "all_gather_object", "gather", "gather_object", "all_reduce", "reduce", "gather_for_metrics"}


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
    """A DataLoader built in the function with `sampler=` or `batch_sampler=` a
    DistributedSampler, inline or through names bound to one (`sampler_train =
    DistributedSampler(...)`, also in one branch of an `if`) or to something built on one
    (lufficc/SSD's `batch_sampler = BatchSampler(sampler=sampler, ...)`, then wrapped in an
    IterationBasedBatchSampler), and something returned."""
    if not _returns_something(function):
        return False
    bindings = [
        (t.id, n.value) for n in ast.walk(function) if isinstance(n, ast.Assign)
        for t in n.targets if isinstance(t, ast.Name)
    ]
    samplers: set[str] = set()
    while True:
        more = {name for name, value in bindings if name not in samplers and _built_on_sampler(value, samplers)}
        if not more:
            break
        samplers |= more
    return any(
        isinstance(node, ast.Call) and ast.unparse(node.func).rsplit(".", 1)[-1] == "DataLoader"
        and any(kw.arg in ("sampler", "batch_sampler") and _built_on_sampler(kw.value, samplers) for kw in node.keywords)
        for node in ast.walk(function)
    )


def _built_on_sampler(value: ast.expr, samplers: set[str]) -> bool:
    return _SAMPLER in ast.unparse(value) or any(
        isinstance(n, ast.Name) and n.id in samplers for n in ast.walk(value)
    )


def _returns_something(function: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(function))
