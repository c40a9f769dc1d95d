"""Training steps one process may skip on its own: `if loss == 0: continue` above the
backward, `if torch.isnan(loss): break`, or an `except` that swallows the step's error and
goes on. On one process that only drops a step; on N, DDP's all-reduce in every other
process's backward waits for the one that skipped, and the run hangs.

A test that reads only what every process shares (an enumerate index, a counter, a
setting: `if step < args.resume_step: continue`) skips on every process at once and is
not reported. Nothing here edits the tree.
"""

from __future__ import annotations

from typing import Callable, Iterator

import libcst as cst

from migrator.analysis.metric_loop import enumerate_index, names_in
from migrator.analysis.names import dotted_name
from migrator.analysis.walk import contains, walk


def skipped_steps(
    loop: cst.For | cst.While, is_training: Callable[[cst.CSTNode], bool], value_of: Callable[[str], list[cst.CSTNode]],
    shared: frozenset[str] = frozenset(),
) -> Iterator[tuple[cst.CSTNode, str]]:
    """(the statement that skips, why) for each way out of a step that only some
    processes may take; `is_training(node)`: whether `node` holds a backward (or a call
    of a function that runs one); `value_of(name)`: what a name of the loop's function
    is bound to (`pbar = tqdm(range(n))`), each binding; `shared`: functions whose result
    the migration makes the same on every process (a validation returning meters it adds
    up across processes)."""
    if not is_training(loop.body):
        return
    per_process = _per_process(loop, value_of, shared)
    trained = False  # a backward above: a `continue` from here on skips only what follows it
    tests: list[cst.If] = []
    for statement in _own_statements(loop.body):
        if isinstance(statement, cst.SimpleStatementLine) and is_training(statement):
            trained = True
        if isinstance(statement, cst.If) and _exits(statement.body, breaks_only=trained):
            if _reads(statement.test) & per_process:
                tests.append(statement)
        if isinstance(statement, cst.Try) and is_training(statement.body):
            for handler in statement.handlers:
                if not _raises(handler.body):
                    caught = cst.Module([]).code_for_node(handler.type).strip() if handler.type else "everything"
                    yield handler, f"an error ({caught}) caught here ends the step on the process that raised it alone"
                    break
    for statement in tests:  # the innermost test that leaves: `if a: ... if b: break` is named at `if b`
        if not any(other is not statement and contains(statement.body, other) for other in tests):
            test = cst.Module([]).code_for_node(statement.test).strip()
            yield statement, f"`if {test}:` leaves the step on the processes where it holds"


def _own_statements(block: cst.BaseSuite) -> Iterator[cst.BaseStatement]:
    """The loop's statements, through `if`/`with`/`try` blocks, not into nested loops or
    functions (their `continue` and `break` are their own)."""
    if not isinstance(block, cst.IndentedBlock):
        return
    for statement in block.body:
        yield statement
        if isinstance(statement, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef)):
            continue
        for child in ("body", "orelse", "finalbody"):
            inner = getattr(statement, child, None)
            while inner is not None:  # a block, an `else:`/`finally:`, or an `elif` and what follows it
                if isinstance(inner, cst.BaseSuite):
                    yield from _own_statements(inner)
                    break
                if isinstance(inner, cst.If):
                    yield inner
                body = getattr(inner, "body", None)
                if isinstance(body, cst.BaseSuite):
                    yield from _own_statements(body)
                inner = inner.orelse if isinstance(inner, cst.If) else None
        for handler in getattr(statement, "handlers", ()):
            yield from _own_statements(handler.body)


def _exits(block: cst.BaseSuite, breaks_only: bool = False) -> bool:
    """The block ends the step: a `continue` or `break` of the loop (not of a nested one);
    only a `break` with `breaks_only` (after the backward, a `continue` skips no step)."""
    kinds = (cst.Break,) if breaks_only else (cst.Continue, cst.Break)
    lines = [s.body for s in _own_statements(block) if isinstance(s, cst.SimpleStatementLine)]
    if isinstance(block, cst.SimpleStatementSuite):
        lines.append(block.body)
    return any(isinstance(small, kinds) for line in lines for small in line)


def _raises(block: cst.BaseSuite) -> bool:
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Raise(self, node: cst.Raise) -> None:
            nonlocal found
            found = True

    walk(block, _Find())
    return found


_WRAPPERS = {"tqdm", "enumerate", "iter", "trange"}
_SHARED_CALLS = {"range", "count", "int", "float", "min", "max", "abs", "round", "len", "bool", "str", "divmod"}


def _counts(iterable: cst.CSTNode | None, value_of: Callable[[str], list[cst.CSTNode]], depth: int = 0) -> bool:
    """`range(n)`, `tqdm(range(n))`, `count()`, or a name bound to one of them."""
    if isinstance(iterable, cst.Name):
        return depth < 3 and any(_counts(v, value_of, depth + 1) for v in value_of(iterable.value))
    if not isinstance(iterable, cst.Call):
        return False
    callee = (dotted_name(iterable.func) or "").split(".")[-1]
    if callee in _WRAPPERS or callee == "trange":
        return callee == "trange" or bool(iterable.args) and _counts(iterable.args[0].value, value_of, depth)
    return callee in ("range", "count")


def _loop_values(loop: cst.For | cst.While, value_of: Callable[[str], list[cst.CSTNode]]) -> set[str]:
    """What the loop hands each step (`data` of `for i, data in enumerate(loader)`), not
    its index, nor the numbers of a `range`."""
    if not isinstance(loop, cst.For) or _counts(loop.iter, value_of):
        return set()
    return {n.value for n in names_in(loop.target)} - {enumerate_index(loop)}


def _calls_data(value: cst.CSTNode, shared: frozenset[str] = frozenset()) -> bool:
    """A call other than arithmetic on numbers (`next(it)`, `model(x)`, `loss.item()`)
    or of a function in `shared`: what it returns may be this process's own."""
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            callee = dotted_name(node.func) or ""
            found = found or (callee.split(".")[-1] not in _SHARED_CALLS and callee not in shared)

    walk(value, _Find())
    return found


def _per_process(
    loop: cst.For | cst.While, value_of: Callable[[str], list[cst.CSTNode]], shared: frozenset[str] = frozenset(),
) -> set[str]:
    """Names of the loop whose value may differ between processes: what the loop hands
    each step, what a call returns (`next(it)`, `model(x)`), and what is computed from
    them. A name computed only from what every process shares (an enumerate index, `i = idx + args.start`, `step += 1`, a setting bound
    outside the loop) is not. A name bound under an `if` whose test reads such a value
    differs too: UNet++'s early stop counts `trigger += 1` every epoch and sets
    `trigger = 0` under `if val_log['iou'] > best_iou:`, a test of this process's own
    validation, so `if trigger >= patience: break` ends the run on some processes only."""
    values: dict[str, list[cst.CSTNode]] = {}
    objects: dict[str, list[cst.CSTNode]] = {}  # `stopper(score)`, `history.append(loss)`: what objects are handed
    batches: set[str] = set()  # targets of the loops inside that draw batches (not counters)
    tests: list[cst.BaseExpression] = []  # the tests of the `if`s around the statement being read

    def bind(name: str, value: cst.CSTNode) -> None:
        values.setdefault(name, []).extend([value, *tests])

    class _Find(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            tests.append(node.test)

        def leave_If(self, original_node: cst.If) -> None:
            tests.pop()

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                for name in _targets(target.target):
                    bind(name, node.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            for name in _targets(node.target):
                bind(name, node.value)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            for n in names_in(node.target):
                bind(n.value, node.value if node.value is not None else node.target)

        def visit_Expr(self, node: cst.Expr) -> None:
            # `early_stopping(valid_loss, ...)`, `history.append(loss)`: the object keeps what it
            # is handed, so `if early_stopping.early_stop: break` reads it (ConvLSTM, reader R3)
            call = node.value
            if isinstance(call, cst.Call) and call.args:
                func = call.func
                owner = func if isinstance(func, cst.Name) else func.value if isinstance(func, cst.Attribute) else None
                if isinstance(owner, cst.Name):
                    objects.setdefault(owner.value, []).extend(a.value for a in call.args)
                if isinstance(owner, cst.Name) and isinstance(func, cst.Attribute) and func.attr.value == "update":
                    for a in call.args:  # `log.update(result)`: the dict now holds what it is given
                        bind(owner.value, a.value)

        def visit_For(self, node: cst.For) -> None:
            index = enumerate_index(node)  # `step` of `for step, batch in enumerate(loader)`: a count
            for n in names_in(node.target):
                bind(n.value, cst.Integer("0") if n.value == index else node.iter)
                if n.value != index and not _counts(node.iter, value_of):
                    batches.add(n.value)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    walk(loop.body, _Find())
    varying = _loop_values(loop, value_of) | {name for name, bound in values.items() if any(_calls_data(v, shared) for v in bound)}
    # an object handed what the batches of this process gave (ConvLSTM's `early_stopping(valid_loss,
    # ...)` over the validation loader) keeps this process's own; one handed a score computed on
    # the whole data (no batch of a loop) decides alike everywhere
    drawn = _closure(_loop_values(loop, value_of) | batches, {n: values.get(n, []) + objects.get(n, []) for n in {*values, *objects}})
    varying |= {name for name, handed in objects.items() if any({n.value for n in names_in(v)} & drawn for v in handed)}
    return _closure(varying, values)


def _targets(target: cst.BaseExpression) -> list[str]:
    """What an assignment binds: names, and `self.mnt_best` as such (not `self`, which
    would make every `self.` read vary with it)."""
    if isinstance(target, cst.Attribute):
        name = dotted_name(target)
        return [name] if name else []
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _targets(e.value)]
    if isinstance(target, cst.Subscript):
        return _targets(target.value)
    return [n.value for n in names_in(target)]


def _reads(node: cst.CSTNode) -> set[str]:
    """The names an expression reads, and its dotted attributes (`self.counter`)."""
    out = {n.value for n in names_in(node)}

    class _Find(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> None:
            name = dotted_name(n)
            if name:
                out.add(name)

    walk(node, _Find())
    return out


def _closure(seed: set[str], values: dict[str, list[cst.CSTNode]]) -> set[str]:
    """`seed` and every name computed from it."""
    varying = set(seed)
    changed = True
    while changed:
        changed = False
        for name, bound in values.items():
            if name not in varying and any(_reads(v) & varying for v in bound):
                varying.add(name)
                changed = True
    return varying
