"""Evaluation metrics counted per process, and what to gather so they count every process.

In an evaluation loop over a prepared dataloader each process sees 1/N of the data, so
`correct += (pred == target).sum().item()` counts 1/N of the answers. The fix gathers the
loop's per-sample tensors with `accelerator.gather_for_metrics` before anything is counted:
the model outputs and batch tensors the metrics are computed from (the *roots*), right after
the last of them is bound, so every value derived from them (`pred = output.argmax(1)`)
and every metric is over all processes. Hugging Face `metric.add_batch(predictions=...,
references=...)` gathers its arguments instead, as run_glue_no_trainer does. A 0-d loss
is reduced instead (losses.py); where gathering in place would hand later code every
process's rows, new names are used (metric_shapes.py). Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrator.analysis.collect import Facts, LoopFact
from migrator.analysis.losses import loss_reduction
from migrator.analysis.metric_loop import EvalLoop, leaves_torch, names_in
from migrator.analysis.metric_shapes import (
    derived_roots,
    direct_values,
    fresh_name,
    metric_chain,
    names_of_scope,
    reused_after,
    single_subscript,
)
from migrator.analysis.names import dotted_name
from migrator.analysis.roles import Role, RoleTable
from migrator.analysis.walk import walk

_KEYWORD_COLLECTORS = {"add_batch", "add"}
_GATHERS = {"gather", "gather_for_metrics", "reduce", "all_gather", "all_reduce", "pad_across_processes"}


@dataclass(frozen=True, eq=False)
class ArgGather:
    """`metric.add_batch(predictions=p, references=batch["labels"])`: gather the argument
    values into names (the keywords) right before the call."""

    statement: cst.SimpleStatementLine
    call: cst.Call
    args: tuple[tuple[str, cst.Arg], ...]  # (name to gather into, the arg)


@dataclass(frozen=True, eq=False)
class MetricsGather:
    """One evaluation loop's metrics: gather `names` after `after` (a statement in the
    loop), or before the loop body's first statement when `after` is None; `arg_gathers`
    for add_batch-style calls; `reason` when the shape does not allow it."""

    loop: cst.For
    statements: tuple[cst.BaseSmallStatement, ...]
    names: tuple[str, ...]
    after: cst.BaseStatement | None
    arg_gathers: tuple[ArgGather, ...]
    reason: str | None
    anchor: cst.CSTNode
    # what each name gathers (`batch["labels"]` into `labels`); the names themselves when equal
    values: tuple[str, ...] = ()
    # (what the metric statements read, the name they read instead): `batch["labels"]` ->
    # `labels`, or `recon_batch` -> `all_recon_batch` when the loop reuses the per-process value
    renames: tuple[tuple[str, str], ...] = ()
    # scalar losses averaged (or summed) across processes right after they are computed:
    # (name, "mean" | "sum", the statement binding it)
    reductions: tuple[tuple[str, str, cst.BaseStatement], ...] = ()


def _already_gathered(loop: cst.For) -> bool:
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = node.func
            found = found or (isinstance(func, cst.Attribute) and func.attr.value in _GATHERS)

    walk(loop.body, _Find())
    return found


def _subscripted_roots(loop: EvalLoop, statements: list[cst.BaseSmallStatement]) -> list[str]:
    """Loop targets read only through `batch["labels"]` in metrics: gathering the whole
    batch (inputs of different lengths on different processes) is not what is wanted."""
    out = []
    for small in statements:
        for n in names_in(small):
            if n.value in loop.targets and n.value not in out:
                out.append(n.value)
    return out


def metrics_gathers(
    facts: Facts, roles: RoleTable, backward_loops: set[int], prepared: frozenset[str], parent,
    reducers: frozenset[str] = frozenset(),
    summed: frozenset[int] = frozenset(),
) -> tuple[MetricsGather, ...]:
    """`reducers`: other files' helpers that all-reduce what they are given (`utils.reduce_sum`);
    `summed`: ids of meter updates added up across processes after their loop (meters.py)."""
    out = []
    for fact in facts.loops:
        if id(fact.node) in backward_loops or not sharded_loop(fact, facts, roles, prepared) or _already_gathered(fact.node):
            continue
        found = _gather(fact, facts, roles, parent, summed)
        if found is not None and not _aggregated_later(found, fact, facts, reducers):
            out.append(found)
    return tuple(out)


def sharded_loop(fact: LoopFact, facts: Facts, roles: RoleTable, prepared: frozenset[str]) -> bool:
    """The loop iterates a prepared loader: prepared here, a parameter (the caller passes
    the prepared one), or `self.loader` stored from one (`self.loader = loader`)."""
    name = fact.iter_name
    if name is None or roles.of(name) is not Role.DATALOADER:
        return False
    if name in prepared or facts.loader_parameter(fact.scope, name):
        return True
    if not name.startswith("self."):
        return False
    for b in facts.bindings:
        if b.name == name and isinstance(b.value, cst.Name):
            source = b.value.value
            if source in prepared or facts.loader_parameter(b.scope, source):
                return True
    return False


def _gather(fact: LoopFact, facts: Facts, roles: RoleTable, parent, summed: frozenset[int] = frozenset()) -> MetricsGather | None:
    loop = EvalLoop(fact, facts, roles)
    statements: list[cst.BaseSmallStatement] = []
    arg_gathers: list[ArgGather] = []
    reason = None
    roots: set[str] = set()
    scalars: dict[str, str] = {}
    for stmt, direct in loop.lines:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            value = loop.metric(small)
            if value is None or (isinstance(small, cst.Expr) and id(small.value) in summed):
                continue
            statements.append(small)
            if not direct:
                reason = reason or "a metric is counted under a condition or in a nested loop"
                continue
            call = small.value if isinstance(small, cst.Expr) else None
            if isinstance(call, cst.Call) and call.func.attr.value in _KEYWORD_COLLECTORS and call.args and all(  # type: ignore[union-attr]
                a.keyword is not None for a in call.args
            ):
                arg_gathers.append(ArgGather(stmt, call, tuple((a.keyword.value, a) for a in call.args)))  # type: ignore[union-attr]
                continue
            roots |= loop.sources(value, scalars)
            reason = reason or _scalar_read(value, loop)
    if not statements:
        return None
    reason = reason or _per_batch_values_over_samples(statements)
    names = sorted(roots, key=lambda r: (_first_read(r, statements, loop), r))  # r: a stable order on ties
    values = list(names)
    renames: list[tuple[str, str]] = []
    taken = names_of_scope(facts, fact.scope)
    for r in [r for r in _subscripted_roots(loop, statements) if r in roots and _only_subscripted(r, statements)]:
        read = single_subscript(r, statements)
        if read is None or r in derived_roots(loop, statements) or reason is not None:
            reason = reason or f"a metric reads `{r}[...]` directly; gather that value first"
            continue
        code, key = read
        new = fresh_name(key if key.isidentifier() else "references", taken)
        i = names.index(r)
        names[i], values[i] = new, code
        renames.append((code, new))
    converted = sorted(roots & loop.converted_outputs)
    if converted and reason is None:
        reason = f"`{converted[0]}` turns the model's output into a NumPy or Python value as it is computed; gather the tensor first"
    after = None
    bound_inside = [loop.bound[r] for r in names if r in loop.bound]
    if bound_inside:
        after = max(bound_inside, key=lambda b: b[0])[2]
        first_metric = min(loop.order.get(id(parent(s)), 0) for s in statements)
        if loop.order[id(after)] > first_metric and reason is None:
            reason = "a metric is counted before the model output it needs is computed"
    direct_mode = False
    if reason is None and names:
        in_loop = [n for n in names if n in loop.bound or n in loop.targets]
        reused = reused_after(loop, after, statements, in_loop)
        early = _computed_before(loop, statements, after, set(names))
        if early or reused and derived_roots(loop, statements) & set(reused):
            # the metrics read values computed from what is reused: gather those values
            # instead (`predictions`), right before the metrics, into new names
            direct = direct_values(loop, statements, {code.split("[")[0] for code, _ in renames})
            direct_mode = direct is not None
            converted = sorted(n for n in metric_chain(loop, statements) if leaves_torch(loop.bound[n][1]))  # type: ignore[arg-type]
            if direct is None and converted:
                reason = (
                    f"the metric reads NumPy values made in the loop (`{converted[0]}`): gathering the "
                    "tensors they come from needs the same shape on every process beyond the batch (images of one "
                    "size), which the code does not show; add the metric's state up across processes after the loop "
                    "(`accelerator.reduce`) instead"
                )
            elif direct is None:
                reason = (
                    f"`{early}` is computed from this process's values before the last of them is bound; gather by hand"
                    if early else f"`{reused[0]}` is used again in the loop with this process's shape; gather into new names by hand"
                )
            else:
                kept = [(n, v) for n, v in zip(names, values) if n != v]  # batch["labels"] -> labels
                names, values = direct + [n for n, _ in kept], direct + [v for _, v in kept]
                after = max((loop.bound[d] for d in direct if d in loop.bound), key=lambda b: b[0], default=(0, None, None))[2]
                read = set(direct) | {code.split("[")[0] for code, _ in renames}
                readers = [s for s in statements if any(n.value in read for n in names_in(s))]
                first_metric = min(loop.order.get(id(parent(s)), 0) for s in readers)
                if after is not None and loop.order[id(after)] > first_metric:
                    reason = "a metric is counted before the value it reads is computed"
                # only what the loop reads again after this later gather needs a new name
                reused = reused_after(loop, after, statements, direct) if reason is None else []
        in_place = [n for n in names if n in loop.bound or n in loop.targets]
        renamed = [n for n in in_place if n in reused] if direct_mode else in_place
        for name in renamed if reused and reason is None else ():
            new = fresh_name(f"all_{name}", taken)
            names[names.index(name)] = new
            renames.append((name, new))
    for name, reduction in list(scalars.items()):
        if reduction == "mean" and _summed_over_dataset(fact, facts, statements, name):
            scalars[name] = "sum"
    reductions = tuple((n, r, loop.bound[n][2]) for n, r in sorted(scalars.items(), key=lambda i: loop.bound[i[0]][0]))
    return MetricsGather(
        fact.node, tuple(statements), tuple(names), after, tuple(arg_gathers), reason, statements[0],
        values=tuple(values), renames=tuple(renames), reductions=reductions,
    )


def _per_batch_values_over_samples(statements: list[cst.BaseSmallStatement]) -> str | None:
    """`acc += get_accuracy(SR, GT)` beside `length += images.size(0)` (LeeJunHyun's
    Image_Segmentation): what a helper returns for each batch, added up and divided by a
    count of samples. Gathered, each step's batch is N times larger and the steps N times
    fewer: a helper that averages over its batch would add up to 1/N of the original
    figure. Whether it averages or sums cannot be seen here."""
    helper = next((s for s in statements if _adds_a_helper_result(s)), None)
    if helper is None or not any(_counts_samples(s) for s in statements):
        return None
    shown = cst.Module([]).code_for_node(helper).strip()
    return (
        f"`{shown}` adds up what a helper returns for each batch, and a count of samples divides it: gathered, "
        "each batch would be N times larger and the sum would change with N if the helper averages over its batch; "
        "add up per-sample sums and counts across processes after the loop (`accelerator.reduce`) instead"
    )


def _adds_a_helper_result(small: cst.BaseSmallStatement) -> bool:
    return (
        isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign)
        and isinstance(small.value, cst.Call) and isinstance(small.value.func, cst.Name)
        and small.value.func.value not in ("len", "int", "float", "sum")
    )


def _counts_samples(small: cst.BaseSmallStatement) -> bool:
    """`length += images.size(0)`, `total += labels.shape[0]`, `n += len(x)`."""
    if not isinstance(small, cst.AugAssign) or not isinstance(small.operator, cst.AddAssign):
        return False
    value = small.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "size":
        return True
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "len":
        return True
    return isinstance(value, cst.Subscript) and isinstance(value.value, cst.Attribute) and value.value.attr.value == "shape"


def _computed_before(loop: EvalLoop, statements, after: cst.BaseStatement | None, gathered: set[str]) -> str | None:
    """A value the metrics read, computed from a gathered name before the gather
    (`pred = out.argmax(1)` above `y = y.to(device)`): it would keep this process's rows."""
    if after is None:
        return None
    for name in sorted(metric_chain(loop, statements), key=lambda n: loop.bound[n][0]):
        position, value, _ = loop.bound[name]
        if position < loop.order[id(after)] and value is not None and loop.roots_of(value) & gathered:
            return name
    return None


def _scalar_read(value: cst.CSTNode, loop: EvalLoop) -> str | None:
    """A metric that reads a loss as a Python number (`loss = criterion(o, y).item()`)
    or `outputs.loss` inline: neither can be gathered, and the tensor is not at hand."""
    for n in names_in(value):
        bound = loop.bound.get(n.value)
        if bound is not None and isinstance(bound[1], cst.Call) and isinstance(bound[1].func, cst.Attribute):
            if bound[1].func.attr.value == "item" and loss_reduction(bound[1].func.value, loop.criteria):
                return f"`{n.value}` is a Python number; reduce the loss tensor with `accelerator.reduce` before `.item()`"
    found = None

    class _Find(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            nonlocal found
            if node.attr.value == "loss" and dotted_name(node.value) in loop.roots:
                found = found or dotted_name(node)

    walk(value, _Find())
    return f"`{found}` is one number per process; reduce it with `accelerator.reduce` first" if found else None


def _summed_over_dataset(fact: LoopFact, facts: Facts, statements: list[cst.BaseSmallStatement], name: str) -> bool:
    """`test_loss += loss.item()` in the loop, `test_loss / len(loader.dataset)` after it:
    the batch losses add up over the whole data set, so each batch's is summed across
    processes (averaged, the total would cover 1/N of the batches)."""
    totals = {
        dotted_name(s.target) for s in statements
        if isinstance(s, cst.AugAssign) and any(n.value == name for n in names_in(s.value))
    }
    start = facts.order.get(fact.node, 0)
    for node in facts.by_type.get("BinaryOperation", ()):
        if not isinstance(node.operator, cst.Divide) or dotted_name(node.left) not in totals:
            continue
        right = node.right
        if facts.order.get(node, 0) <= start or not (isinstance(right, cst.Call) and dotted_name(right.func) == "len"):
            continue
        argument = right.args[0].value if right.args else None
        if isinstance(argument, cst.Attribute) and argument.attr.value == "dataset":
            return True
    return False


def _aggregated_later(found: MetricsGather, fact: LoopFact, facts: Facts, reducers: frozenset[str] = frozenset()) -> bool:
    """The script already combines the counts across processes itself
    (`dist.all_reduce(correct)` after the loop, or a helper of another file that does,
    `utils.reduce_sum(correct)`): gathering too would count N times."""
    reduced_here = _reduced_in_loop(fact, facts, reducers)
    if reduced_here and all(reduced_here & {n.value for n in names_in(small)} for small in found.statements):
        return True  # Swin's `acc1 = reduce_tensor(acc1)`, then `acc1_meter.update(acc1.item(), n)`
    accumulators = set()
    for small in found.statements:
        if isinstance(small, cst.AugAssign):
            accumulators.add(dotted_name(small.target))
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            accumulators.add(dotted_name(small.value.func.value))  # type: ignore[attr-defined]
    for c in facts.calls:
        func = c.node.func
        if c.scope is not fact.scope or fact.node in c.loops or not isinstance(func, (cst.Attribute, cst.Name)):
            continue
        gathers = dotted_name(func) in reducers or isinstance(func, cst.Attribute) and func.attr.value in _GATHERS
        if gathers and any(dotted_name(a.value) in accumulators for a in c.node.args):
            return True
    return False


def _reduced_in_loop(fact: LoopFact, facts: Facts, reducers: frozenset[str]) -> set[str]:
    """Names the loop binds to what a helper of another file all-reduced (`acc1 =
    reduce_tensor(acc1)`): the same on every process already."""
    return {
        b.name for b in facts.bindings
        if fact.node in b.loops and isinstance(b.value, cst.Call) and dotted_name(b.value.func) in reducers
    }


def _first_read(root: str, statements: list[cst.BaseSmallStatement], loop: EvalLoop) -> tuple[int, int]:
    """Order of the gathered names: as the metrics first read them (directly or through
    a value computed from them)."""
    for i, small in enumerate(statements):
        names = names_in(small)
        for j, n in enumerate(names):
            if n.value == root or (n.value in loop.bound and root in loop.roots_of(n)):
                return (i, j)
    return (len(statements), 0)


def _only_subscripted(name: str, statements: list[cst.BaseSmallStatement]) -> bool:
    """Every read of `name` in the metric statements is `name[...]`."""
    reads = 0
    subscripted = 0

    class _Find(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> None:
            nonlocal subscripted
            if isinstance(node.value, cst.Name) and node.value.value == name:
                subscripted += 1

        def visit_Name(self, node: cst.Name) -> None:
            nonlocal reads
            reads += node.value == name

    for small in statements:
        walk(small, _Find())
    return reads > 0 and reads == subscripted
