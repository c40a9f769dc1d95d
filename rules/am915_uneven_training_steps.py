"""AM915: each process would take a different number of training steps."""

from __future__ import annotations

import re

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.meters import returns_synced_meters, why_left
from migrator.analysis.step_skips import skipped_steps
from migrator.analysis.roles import own_batch_iterators
from migrator.rule import Example, Rule
from migrator.analysis.walk import walk


class UnevenTrainingSteps(Rule):
    """## What it does
    Reports a backward pass (directly, or through a function of this file) inside a loop
    whose length each process decides for itself: `for t in count(): ... if done: break`,
    a `while` loop that ends on a `break` or on `done` (an environment episode, a
    convergence test), or behind a test of a replay buffer's fill level
    (`if memory.size() > 2000:`). Nothing is changed.

    ## Why is this bad?
    On N processes DDP all-reduces the gradients in every backward, and every process
    must call it the same number of times. When one process's episode ends earlier, the
    others wait in an all-reduce that never comes: the run hangs, or mixes up collectives.
    Independent actors (each process its own environment and replay memory) also train
    differently from one process with an N times larger batch.

    ## Example
    ```python
    for t in count():
        action = select_action(state)
        observation, reward, terminated, truncated, _ = env.step(action.item())
        optimize_model()          # calls loss.backward()
        if terminated or truncated:
            break
    ```

    Use instead: keep such training on one process, or make the number of optimisation
    steps the same on every process (a fixed number of updates per episode, decoupled from
    the episode's length), then migrate.

    A step one process may leave on its own is reported too: `if loss == 0: continue` (or
    `if torch.isnan(loss): continue`) above the backward, a `break` on a value of this
    process's batch, an `except` that swallows the step's error and goes on. A test of
    what every process shares (an enumerate index, a counter, a setting) is not. In a
    script left without an Accelerator that drives another file's training (a base
    trainer's `self._train_epoch(epoch)`, `train_test(model, ...)` of another module), those
    calls are the steps: an early stop on the results they return each process is named.

    ## Known limits
    Loops over a DataLoader, a `range()` or a fixed collection are not reported: a `break`
    on a step budget there is the same on every process.
    """

    code = "AM915"
    name = "uneven-training-steps"
    message = (
        "{what} runs a number of times each process decides for itself ({why}); "
        "on N processes the gradient all-reduce would be called a different number of times and hang"
    )
    examples = (
        Example(
            before=(
                "import torch\nfrom itertools import count\n\nmodel = torch.nn.Linear(2, 1)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n\n\n"
                "def optimize():\n    loss = model(torch.zeros(1, 2)).sum()\n    loss.backward()\n    optimizer.step()\n\n\n"
                "for t in count():\n    optimize()\n    if t > torch.rand(1).item() * 10:\n        break\n"
            ),
            at=("15:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        # a script left without an Accelerator that drives another file's training
        # (`self._train_epoch(epoch)`, `train_test(model, ...)`): those calls train
        self._drives = (
            {spelling for spelling, *_ in self.ctx.config.project_drives}
            if not analysis.migrating and not analysis.accelerator_names else set()
        )
        trainers = self._trainers()
        for loop in [*self.analysis.nodes("For"), *self.analysis.nodes("While")]:
            why = _uneven(loop)
            if why is None:
                continue
            found = self._first_training_call(loop, trainers)
            if found is not None:
                what = cst.Module([]).code_for_node(found.func).strip() + "()"
                self.report(found, what=f"`{what}`", why=why)
        shared = self._shared_results()
        for loop in [*self.analysis.nodes("For"), *self.analysis.nodes("While")]:
            if _uneven(loop) is not None:
                continue  # reported above as a whole
            value_of = self._values_in(loop)
            trains = lambda node: self._first_training_call(node, trainers) is not None  # noqa: E731
            for skip, why in skipped_steps(loop, trains, value_of, shared):
                if self._size_test_over_whole_data(loop, skip):
                    continue
                found = self._first_training_call(loop.body, trainers)
                what = cst.Module([]).code_for_node(found.func).strip() + "()"  # type: ignore[union-attr]
                self.report(skip, what=f"`{what}`", why=why)
        for branch in self.analysis.nodes("If"):
            test = cst.Module([]).code_for_node(branch.test).strip()
            if not _BUFFER_TEST.search(test):
                continue
            found = self._first_training_call(branch.body, trainers)
            if found is not None:
                what = cst.Module([]).code_for_node(found.func).strip() + "()"
                self.report(found, what=f"`{what}`", why=f"only `if {test}`, a count each process reaches at its own pace")
                continue
            function = self.analysis.scope_of(branch)
            if isinstance(function, cst.FunctionDef) and _returns(branch.body) and not self._filled_step_by_step(function, test):
                found = self._first_training_call(function, trainers)
                if found is not None:  # `if len(memory) < BATCH_SIZE: return` atop `optimize_model()`
                    what = cst.Module([]).code_for_node(found.func).strip() + "()"
                    self.report(
                        branch, what=f"`{what}` in `{function.name.value}()`",
                        why=f"`if {test}: return`, a count each process reaches at its own pace",
                    )

    def _size_test_over_whole_data(self, loop: cst.CSTNode, skip: cst.CSTNode) -> bool:
        """`if text.size()[0] is not 32: continue` in a loop over batches no prepare() splits
        (a torchtext iterator, a batch iterator of the run's own): every process reads all
        of the data in batches of the same sizes, so each skips as many steps as the others
        (prakashpandey9's main.py, reader R3, 29th session)."""
        if not isinstance(skip, cst.If) or not isinstance(loop, cst.For):
            return False
        test = cst.Module([]).code_for_node(skip.test)
        rest = re.sub(r"\b(is|not|and|or)\b", "", _SIZE_TEST.sub("", test))
        if not _SIZE_TEST.search(test) or re.search(r"[A-Za-z_]", rest):
            return False  # the test reads something besides the batch's size and constants
        source = _peeled(loop.iter)
        name = dotted_name(source) or ""
        whole = set(self.ctx.config.project_iterators) | own_batch_iterators(self.analysis.facts)
        return name in whole

    def _trainers(self) -> set[str]:
        """Functions of this file that train, directly or through another such function:
        `optimize()` by name, and a class's method as `Class.method` (minimalRL's
        `model.train_net()` on `model = PPO()`, `self.update()` inside the class)."""
        analysis = self.analysis
        keyed = {}
        for function in analysis.nodes("FunctionDef"):
            owner = analysis.facts.method_of.get(id(function))
            key = f"{owner.name.value}.{function.name.value}" if owner is not None else function.name.value
            keyed.setdefault(key, []).append(function)
        self._instances = {
            b.name: b.value.func.value for b in analysis.facts.bindings
            if isinstance(b.value, cst.Call) and isinstance(b.value.func, cst.Name) and b.value.func.value in analysis.facts.classes
        }
        trainers: set[str] = set()
        while True:
            found = {
                key for key, functions in keyed.items() if key not in trainers
                and any(self._first_training_call(f, trainers) is not None for f in functions)
            }
            if not found:
                return trainers
            trainers |= found

    def _filled_step_by_step(self, function: cst.FunctionDef, test: str) -> bool:
        """Every call of `function` sits in a loop whose own body also adds one item to the
        memory its test reads (the DQN tutorial: `memory.push(...)` then `optimize_model()`
        each step): the fill level is the step count, the same on every process."""
        memory = _MEMORY_NAME.search(test)
        calls = [
            c.node for c in self.analysis.facts.calls
            if isinstance(c.node.func, cst.Name) and c.node.func.value == function.name.value
        ]
        if memory is None or not calls:
            return False
        for call in calls:
            loop = self.analysis.parent(call)
            while loop is not None and not isinstance(loop, (cst.For, cst.While, cst.FunctionDef, cst.Module)):
                loop = self.analysis.parent(loop)
            if not isinstance(loop, (cst.For, cst.While)) or not _adds_to(loop.body, memory.group(1)):
                return False
        return True

    def _shared_results(self) -> frozenset[str]:
        """Functions of this file whose result the migration makes the same on every
        process: a validation returning the figures of meters whose sums AM522 adds up
        across processes after their loop (`return OrderedDict([('iou', avg_meters['iou'].avg)])`),
        or one that reads only data left whole. An early stop on them stops every process
        at once."""
        analysis = self.analysis
        if not analysis.migrating:
            return frozenset()
        whole = frozenset(f.name.value for f in analysis.nodes("FunctionDef") if self._reads_only_whole_data(f))
        if analysis.patterns is None:
            return whole
        syncs = tuple(
            s for s in analysis.patterns.meters
            if analysis.accelerator_at(s.loop) is not None and why_left(s, analysis.branches) is None
        )
        return whole | frozenset(
            f.name.value for f in analysis.nodes("FunctionDef") if syncs and returns_synced_meters(f, syncs)
        )

    def _reads_only_whole_data(self, function: cst.FunctionDef) -> bool:
        """Every loop of `function` runs over one of its parameters (or a `range`), and every
        call of it in this file hands those parameters data the migration leaves out of
        prepare() (Chinese-Text-Classification's `evaluate(config, model, dev_iter)` on a
        batch iterator of its own): each process reads all of it with the same model, so the
        figures it returns are the same everywhere."""
        analysis = self.analysis
        if id(function) in analysis.facts.method_of:
            return False
        params = [p.name.value for p in function.params.params]
        iterated: set[int] = set()
        for loop in analysis.nodes_under(function.body, "For"):
            source = _peeled(loop.iter)
            if isinstance(source, cst.Call) and dotted_name(source.func) == "range":
                continue
            if not (isinstance(source, cst.Name) and source.value in params):
                return False
            iterated.add(params.index(source.value))
        calls = [c.node for c in analysis.facts.calls if isinstance(c.node.func, cst.Name) and c.node.func.value == function.name.value]
        if not iterated or not calls:
            return False
        prepared = analysis.prepared
        for call in calls:
            positional = [a for a in call.args if a.keyword is None]
            if any(a.star for a in call.args):
                return False
            for index in iterated:
                given = positional[index].value if index < len(positional) else next(
                    (a.value for a in call.args if a.keyword is not None and a.keyword.value == params[index]), None,
                )
                if not isinstance(given, cst.Name) or given.value in prepared:
                    return False
        return True

    def _values_in(self, loop: cst.CSTNode):
        """What each name of the loop's function (or module) is bound to, each binding."""
        scope = self.analysis.scope_of(loop)
        bound: dict[str, list[cst.CSTNode]] = {}
        for b in self.analysis.facts.bindings:
            if b.scope is scope and b.value is not None:
                bound.setdefault(b.name, []).append(b.value)
        return lambda name: bound.get(name, [])

    def _first_training_call(self, node: cst.CSTNode, trainers: set[str]) -> cst.Call | None:
        """The first `x.backward(...)` / `accelerator.backward(...)` or call of a function
        in `trainers` under `node`."""
        for call in self.analysis.nodes_under(node, "Call"):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "backward":
                return call
            if isinstance(func, cst.Name) and func.value in trainers:
                return call
            if isinstance(func, cst.Attribute) and f"{self._class_of(func.value, call)}.{func.attr.value}" in trainers:
                return call
            if self._drives and dotted_name(func) in self._drives:
                return call
        return None

    def _class_of(self, receiver: cst.BaseExpression, at: cst.CSTNode) -> str | None:
        """The class of this file `receiver` is an instance of: `self` in its methods, or a
        name bound to a call of the class."""
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            owner = self.analysis.facts.method_of.get(id(self.analysis.scope_of(at)))
            return owner.name.value if owner is not None else None
        name = dotted_name(receiver)
        return self._instances.get(name) if name else None


# a batch's size: `x.size()[0]`, `x.size(0)`, `x.shape[0]`, `len(x)`
_SIZE_TEST = re.compile(r"\w+(\.\w+)*\.size\(\)\[0\]|\w+(\.\w+)*\.size\(0\)|\w+(\.\w+)*\.shape\[0\]|len\(\w+(\.\w+)*\)")
# A replay buffer's fill level, tested before training starts (`if memory.size() > 2000:`).
_BUFFER_TEST = re.compile(r"(memory|buffer|replay)\w*(\.size\(\)|\.__len__\(\))|len\((self\.)?\w*(memory|buffer|replay)\w*\)")


def _peeled(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`data_iter` of `enumerate(data_iter)`, `tqdm(data_iter)`, `iter(data_iter)`."""
    while isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").rsplit(".", 1)[-1] in ("enumerate", "tqdm", "iter") and expr.args:
        expr = expr.args[0].value
    return expr


def _uneven(loop: cst.CSTNode) -> str | None:
    """Why this loop's length is each process's own, or None."""
    if isinstance(loop, cst.For):
        iterated = loop.iter.func if isinstance(loop.iter, cst.Call) else None
        if dotted_name(iterated) in ("count", "itertools.count") and _breaks(loop):
            return "`for ... in count()` until a `break`"
        return None
    if isinstance(loop, cst.While):
        test = cst.Module([]).code_for_node(loop.test)
        if "done" in test or "terminated" in test:
            return f"`while {test.strip()}`"
        if _breaks(loop):
            return "a `while` loop that ends on a `break`"
    return None


# the memory a fill test reads: `len(memory)`, `self.buffer.size()`
_MEMORY_NAME = re.compile(r"((?:self\.)?\w*(?:memory|buffer|replay)\w*)")


def _adds_to(body: cst.BaseSuite, memory: str) -> bool:
    """A statement of the loop body itself (not of a nested loop) adds to `memory`."""
    statements = body.body if isinstance(body, cst.IndentedBlock) else []
    for statement in statements:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            value = small.value if isinstance(small, cst.Expr) else None
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _ADDS:
                if dotted_name(value.func.value) == memory:
                    return True
    return False


_ADDS = {"push", "append", "add", "store", "insert", "put"}


def _returns(block: cst.BaseSuite) -> bool:
    """The block leaves the function: its last statement is a `return`."""
    statements = block.body if isinstance(block, cst.IndentedBlock) else [block]
    last = statements[-1] if statements else None
    if isinstance(last, cst.SimpleStatementLine):
        return isinstance(last.body[-1], cst.Return)
    return isinstance(last, cst.SimpleStatementSuite) and isinstance(last.body[-1], cst.Return)


def _breaks(loop: cst.CSTNode) -> bool:
    """A `break` of this loop (not of a loop nested in it)."""
    found = False

    class _Find(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> bool:
            return False

        def visit_While(self, node: cst.While) -> bool:
            return False

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Break(self, node: cst.Break) -> None:
            nonlocal found
            found = True

    walk(loop.body, _Find())
    return found


