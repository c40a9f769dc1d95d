"""AM218: training set up with an optimizer but no DataLoader: nothing splits the data."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.analysis.roles import TENSOR_MAKERS, library_batch_iterators, own_batch_iterators
from migrator.rule import Example, Rule

_SPLITS = {"process_index", "num_processes", "split_between_processes"}


class UnsplitTrainingData(Rule):
    """## What it does
    When the migration sets up training whose data comes from no DataLoader (tensors
    built in the script, a full batch, slices taken by hand), says so once, at the first
    backward that a loop repeats. In a file the migration leaves alone (an engine whose
    callers set up the training), says it of a training loop over torchtext's
    `BucketIterator`/`Iterator`/`BPTTIterator`, which no caller can prepare. In a run of
    several files, a training loop over an object of the run that keeps its DataLoader
    inside (its `__iter__` draws the batches of `self.loader = DataLoader(...)`) is named at
    both ends: the loop, and the DataLoader the class builds, the one to prepare. Nothing is changed.

    ## Why is this bad?
    `accelerator.prepare()` splits a DataLoader's batches between processes. Data held
    in tensors is not split: where every process reads the same data, each trains on all
    of it. The gradients DDP averages are then the ones one process would compute, so
    training is correct, but N processes are no faster than one. Where each process
    shuffles on its own (a loader of another file kept whole, no common seed), every
    step averages N independently drawn batches: a batch N times larger, whose samples
    repeat across processes within an epoch.

    ## What to do by hand
    Serve the data from a `Dataset` and a `DataLoader` that prepare() can split, or
    split it yourself by `accelerator.process_index` and `accelerator.num_processes`.

    ## Example
    ```python
    for step in range(100):
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
    ```

    Use instead:
    ```python
    loader = accelerator.prepare(DataLoader(TensorDataset(inputs, targets), batch_size=32))
    for step in range(100):
        for x, y in loader:
            optimizer.zero_grad()
            accelerator.backward(criterion(model(x), y))
            optimizer.step()
    ```
    (or keep the full batch, and the single-process speed, knowingly).

    ## Known limits
    A script that collects its data from an environment (`gym.make(...)`,
    reinforcement learning) is not reported: each process rolls out its own episodes,
    which are experience of its own, not a data set to split.

    ## See also
    - AM912 (optimizer-free-training) says the same of scripts that update the
      parameters by hand.
    """

    code = "AM218"
    name = "unsplit-training-data"
    message = (
        "{subject} trains on {data}: nothing splits it between processes, so every process "
        "reads all of it (in one order, the same batches everywhere: correct, but no faster; shuffled without a "
        "common seed, each its own batches: a batch N times larger, its samples repeated across processes); serve it "
        "from a DataLoader passed through prepare(), or split it by `accelerator.process_index` into shards of equal batch counts "
        "(a process with one batch more waits forever in its backward)"
    )
    examples = (
        Example(
            before=(
                "import torch\n\nmodel = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "x, y = torch.ones(4, 2), torch.zeros(4, 1)\nfor step in range(3):\n"
                "    loss = torch.nn.functional.mse_loss(model(x), y)\n    loss.backward()\n    opt.step()\n"
            ),
            after=None,
            at=("8:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if self._wrapped_loaders():
            return
        if not analysis.migrating:
            self._library_iterators_trained_on()
            return
        if not analysis.roles.names(Role.OPTIMIZER):
            return  # optimizer-free training is AM912's
        if any(n.attr.value in _SPLITS for n in analysis.nodes("Attribute")):  # type: ignore[attr-defined]
            return  # the script splits its data by process itself
        prepared = analysis.prepared
        if any(analysis.roles.of(n) is Role.DATALOADER for n in prepared) or _rolls_out_an_environment(analysis):
            return
        served = bool(self.ctx.config.project_iterators)  # the callers hand it batches of their own making
        if not any(analysis.roles.of(n) is Role.MODEL for n in prepared) and not _refused_with_models(analysis) and not served:
            return
        looped = _called_in_loops(analysis)
        for c in analysis.facts.calls:
            func = c.node.func
            repeated = _in_loop(analysis, c.node) or (isinstance(c.scope, cst.FunctionDef) and c.scope.name.value in looped)
            if isinstance(func, cst.Attribute) and func.attr.value == "backward" and repeated:
                seen_into = frozenset(self.ctx.config.project_iterators) | own_batch_iterators(analysis.facts)
                if _iterates_something(analysis, c.node, seen_into):
                    return  # batches drawn from an object we cannot see into (a loader a helper made)
                text = cst.Module([]).code_for_node(c.node).strip()
                self.report(c.node, subject=f"`{text if len(text) < 40 else 'backward()'}`", data=self._served_data(c) or _UNSERVED)
                return

    def _wrapped_loaders(self) -> bool:
        """Both ends of a training loop over an object of the run that keeps its DataLoader
        inside (project/wrapped_loaders.py): here the DataLoader such a class builds, or
        here the loop over one of them, built in another file."""
        analysis, config = self.analysis, self.ctx.config
        found = False
        for cls_name, attr, where in config.project_wrapped_loaders:
            call = _kept_loader(analysis, analysis.facts.classes.get(cls_name), attr)
            if call is not None:
                data = (
                    f"the batches of this DataLoader, which `{cls_name}.__iter__` hands out from `self.{attr}`: "
                    f"built where no Accelerator is, and held by an object prepare() cannot take"
                )
                self.report(call, subject=f"the training loop at {where}", data=data)
                found = True
        for name, line, cls_name, where in config.project_wrapper_loops:
            loop = next((l.node for l in analysis.facts.loops if analysis.position(l.node).start.line == line), None)
            if loop is not None:
                data = (
                    f"the batches of `{name}`, a `{cls_name}` whose DataLoader ({where}) is built where no Accelerator is: "
                    f"prepare() cannot take the `{cls_name}`, only that DataLoader"
                )
                self.report(loop, subject="This loop", data=data)
                found = True
        return found

    def _library_iterators_trained_on(self) -> None:
        """In a file the migration leaves alone (an engine its callers set up), a training
        loop over torchtext's iterator: whatever its callers prepare, the batches stay whole."""
        analysis = self.analysis
        iterators = library_batch_iterators(analysis.facts)
        for loop in analysis.facts.loops:
            if loop.iter_name not in iterators:
                continue
            backward = _backward_of_loop(analysis, loop.node)
            if backward is not None:
                text = cst.Module([]).code_for_node(backward).strip()
                data = f"{self._library_batches(loop, iterators)}, whatever the callers prepare"
                self.report(backward, subject=f"`{text if len(text) < 40 else 'backward()'}`", data=data)
                return

    def _served_data(self, backward) -> str | None:
        """The library iterator a loop around the backward draws from, in words."""
        iterators = library_batch_iterators(self.analysis.facts)
        handed = set(self.ctx.config.project_iterators)  # made by another file of the run
        for loop in self.analysis.facts.loops:
            if not any(l is loop.node for l in backward.loops):
                continue
            if loop.iter_name in iterators:
                return self._library_batches(loop, iterators)
            if loop.iter_name in handed:
                line = self.analysis.position(loop.node).start.line
                made = "a list an object of another file of the run holds" if "." in loop.iter_name else (
                    "a batch iterator another file of the run makes"
                )
                return f"the batches of `{loop.iter_name}` (line {line}), {made}: no DataLoader, so prepare() cannot take it"
        return None

    def _library_batches(self, loop, iterators: dict[str, tuple[str, str]]) -> str:
        line = self.analysis.position(loop.node).start.line
        source, cls = iterators[loop.iter_name]
        of = f"a `{cls}`" if source == loop.iter_name else f"which `{source}`, a `{cls}`, hands out"
        return f"the batches of `{loop.iter_name}` (line {line}), {of}: no DataLoader, so prepare() cannot take it"


_UNSERVED = "data no prepared DataLoader serves"


def _kept_loader(analysis, cls: cst.ClassDef | None, attr: str) -> cst.Call | None:
    """The DataLoader call a method of the class binds to `self.<attr>`."""
    for node in analysis.nodes_under(cls, "Assign") if cls is not None else ():
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and any(
            isinstance(t.target, cst.Attribute) and t.target.attr.value == attr
            and isinstance(t.target.value, cst.Name) and t.target.value.value == "self" for t in node.targets
        ):
            return node.value
    return None


def _backward_of_loop(analysis, loop: cst.For) -> cst.Call | None:
    """The first `.backward()` the loop runs: in its body, or in a function of this file
    (a method of its class) that its body calls."""
    called = set()
    for c in analysis.facts.calls:
        if any(l is loop for l in c.loops):
            func = c.node.func
            called.add(func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else "")
    for c in analysis.facts.calls:
        func = c.node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "backward"):
            continue
        if (analysis.imports.qualify(func.value) or "").startswith("torch"):
            continue  # torch.autograd.backward(...) spelled through the module
        if any(l is loop for l in c.loops) or isinstance(c.scope, cst.FunctionDef) and c.scope.name.value in called:
            return c.node
    return None


_ENVIRONMENTS = ("gym.", "gymnasium.")


def _rolls_out_an_environment(analysis) -> bool:
    """The script makes an environment (`gym.make("CartPole-v1")`): its training data is
    the experience each process collects from its own, nothing to split."""
    return any((c.qualified or "").startswith(_ENVIRONMENTS) and (c.qualified or "").endswith(".make") for c in analysis.facts.calls)


def _refused_with_models(analysis) -> bool:
    """Nothing prepared because the migration of the file is left as written (a lint of
    it), though it trains models: the data it trains on is still worth naming (the
    pointer-generator's thread-fed `Batcher`, reader R3)."""
    return bool(analysis.roles.names(Role.MODEL)) and not analysis.roles.names(Role.DATALOADER)


def _in_loop(analysis, node: cst.CSTNode) -> bool:
    """`node` runs in a for or while loop of its own function (or module)."""
    current = analysis.parent(node)
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        if isinstance(current, (cst.For, cst.While)):
            return True
        current = analysis.parent(current)
    return False


_COUNTERS = {"range", "count", "itertools.count", "trange"}
_WRAPPERS = {"enumerate", "tqdm", "tqdm.tqdm", "iter", "zip"}  # zip: what its first argument draws


def _iterates_something(analysis, node: cst.CSTNode, iterators: frozenset[str] = frozenset()) -> bool:
    """`node` sits in a `for` over something other than a counter (`range`, `count`),
    after unwrapping `enumerate(...)`/`tqdm(...)`: e.g. `for batch in make_data_loader(...)`.
    A parameter the callers hand a batch iterator of their own (`iterators`,
    project/iterators.py) is seen into: no DataLoader, nothing splits it."""
    current = analysis.parent(node)
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        if isinstance(current, cst.For):
            raw = current.iter
            while isinstance(raw, cst.Call) and _name(raw.func) in _WRAPPERS and raw.args:
                raw = raw.args[0].value
            if dotted_name(raw) in iterators:
                current = analysis.parent(current)
                continue  # a batch iterator of the project's own (or a list it holds): seen into, nothing splits it
            source = _bound_value(analysis, current.iter, current)
            while isinstance(source, cst.Call) and _name(source.func) in _WRAPPERS and source.args:
                source = _bound_value(analysis, source.args[0].value, current)
            counter = isinstance(source, cst.Call) and (
                _name(source.func) in _COUNTERS or analysis.imports.qualify(source.func) in TENSOR_MAKERS  # a tensor's rows
            )
            if not counter and not (isinstance(source, cst.Name) and source.value in iterators) and not _served_by(analysis, source, current, iterators):
                return True
        current = analysis.parent(current)
    return False


def _served_by(analysis, source: cst.BaseExpression, loop: cst.For, iterators: frozenset[str]) -> bool:
    """`train_data.generate_batch(batch_size)`, or a name its scope binds only to such
    calls: batches handed out by a method of an object the callers give, of a class of
    the run's own that is no DataLoader (SR-GNN's `Data`): seen into, nothing splits them."""
    values = [source]
    if isinstance(source, cst.Name):
        scope = analysis.scope_of(loop)
        values = [b.value for b in analysis.facts.bindings if b.name == source.value and b.scope is scope]
    return bool(values) and all(
        isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute)
        and isinstance(v.func.value, cst.Name) and v.func.value.value in iterators
        for v in values
    )


def _bound_value(analysis, expr: cst.BaseExpression, loop: cst.For) -> cst.BaseExpression:
    """What a name iterated by `loop` was bound to, when its scope binds it once
    (`t = trange(num_steps)` then `for i in t:`); else the expression itself."""
    if not isinstance(expr, cst.Name):
        return expr
    scope = analysis.scope_of(loop)
    bound = [b for b in analysis.facts.bindings if b.name == expr.value and b.scope is scope]
    if len(bound) == 1 and bound[0].element is None and bound[0].value is not None:
        return bound[0].value
    return expr


def _name(func: cst.BaseExpression) -> str:
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        return f"{func.value.value}.{func.attr.value}"
    return ""


def _called_in_loops(analysis) -> set[str]:
    """Names of functions a loop calls (`train(epoch)`, `self.step(batch)`) or hands to
    `optimizer.step(closure)`: a backward in them runs once per step of that loop."""
    names: set[str] = set()
    for c in analysis.facts.calls:
        if not _in_loop(analysis, c.node):
            continue
        func = c.node.func
        if isinstance(func, cst.Name):
            names.add(func.value)
        elif isinstance(func, cst.Attribute):
            names.add(func.attr.value)
            if func.attr.value == "step":
                names.update(a.value.value for a in c.node.args if isinstance(a.value, cst.Name))
    return names
