"""Where gathering in place would hurt, and what to gather instead.

Rebinding `recon_batch` to every process's rows breaks later code that uses this
process's shape (`recon_batch.view(args.batch_size, ...)`); `batch["labels"]` is
gathered alone, not the whole batch. These helpers choose new names and the values the
metrics read. Nothing here edits the tree.
"""

from __future__ import annotations

import libcst as cst

from migrator.analysis.collect import Facts
from migrator.analysis.metric_loop import EvalLoop, leaves_torch, names_in
from migrator.analysis.names import dotted_name
from migrator.analysis.walk import walk

def names_of_scope(facts: Facts, scope) -> set[str]:
    names = {b.name for b in facts.bindings if b.scope is scope} | {l.name for l in facts.loads if l.scope is scope}
    return names | set(facts.params.get(id(scope), ()))


def fresh_name(name: str, taken: set[str]) -> str:
    candidate, i = name, 2
    while candidate in taken:
        candidate, i = f"{name}_{i}", i + 1
    taken.add(candidate)
    return candidate


def single_subscript(name: str, statements: list[cst.BaseSmallStatement]) -> tuple[str, str] | None:
    """(`batch["labels"]`, "labels") when every read of `name` in the metrics is that one
    subscript; None for several keys or a computed index."""
    codes: set[str] = set()
    key = ""

    class _Find(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> None:
            nonlocal key
            if isinstance(node.value, cst.Name) and node.value.value == name:
                codes.add(cst.Module([]).code_for_node(node))
                index = node.slice[0].slice if len(node.slice) == 1 else None
                value = getattr(index, "value", None)
                if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                    key = value.evaluated_value

    for small in statements:
        walk(small, _Find())
    return (codes.pop(), key) if len(codes) == 1 and key else None


def derived_roots(loop: EvalLoop, statements: list[cst.BaseSmallStatement]) -> set[str]:
    """Roots the metrics reach through values computed in the loop (`pred = out.argmax(1)`)."""
    out: set[str] = set()
    for small in statements:
        for n in names_in(small):
            if n.value in loop.bound and n.value not in loop.roots and loop.bound[n.value][1] is not None:
                if loop.scalar_loss(n.value) is None:  # a loss is reduced where it is, not recomputed
                    out |= loop.roots_of(loop.bound[n.value][1])  # type: ignore[arg-type]
    return out


_REDUCING = {"sum", "mean", "item", "numel", "size", "std", "var", "norm", "tolist", "count_nonzero", "all", "any"}


def direct_values(loop: EvalLoop, statements, subscripted: set[str]) -> list[str] | None:
    """The loop values the metrics read by name (`predictions`, `target`), when each is
    per-sample: computed in the loop without a reduction (`.sum()`, `.item()`, `len`), so
    gathering it along the batch axis is what the metric needs. None otherwise."""
    direct: list[str] = []
    for small in statements:
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and all(a.keyword for a in small.value.args):
            return None  # add_batch(predictions=...) is gathered by its arguments
        for n in names_in(small):
            if n.value in loop.tensors and n.value not in subscripted and n.value not in direct:
                if loop.scalar_loss(n.value) is not None:
                    continue  # reduced where it is bound
                if not (n.value in loop.bound or n.value in loop.targets):
                    return None
                direct.append(n.value)
    for name in metric_chain(loop, statements) | set(direct):
        value = loop.bound[name][1] if name in loop.bound else None
        if value is not None and reduces(value, loop.models):
            return None
    if any(name in loop.bound and loop.bound[name][1] is not None and leaves_torch(loop.bound[name][1]) for name in direct):
        return None  # `gt = labels.cpu().numpy()`: a NumPy array is not gathered
    return direct or None


def reduces(value: cst.CSTNode, models: set[str]) -> bool:
    """Whether `value` may not be one row per sample: a reduction (`.sum()`, `len`), or a
    function of the user's whose result is unknown (`acc1, acc5 = accuracy(out, y)`)."""
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = node.func
            callee = func.attr.value if isinstance(func, cst.Attribute) else dotted_name(func) or ""
            found = found or callee in _REDUCING or (isinstance(func, cst.Name) and callee not in models)

    walk(value, _Find())
    return found


def metric_chain(loop: EvalLoop, statements: list[cst.BaseSmallStatement]) -> set[str]:
    """Names computed in the loop that the metrics read, directly or through each other."""
    out: set[str] = set()
    todo = [n.value for small in statements for n in names_in(small)]
    while todo:
        name = todo.pop()
        if name in out or name not in loop.bound or name in loop.roots or loop.bound[name][1] is None:
            continue
        if loop.scalar_loss(name) is not None:
            continue  # reduced where it is bound: it reads this process's values, as it should
        out.add(name)
        todo += [n.value for n in names_in(loop.bound[name][1])]  # type: ignore[arg-type]
    return out


def reused_after(loop: EvalLoop, after: cst.BaseStatement | None, statements, names: list[str]) -> list[str]:
    """Gathered names the loop reads again after the gather outside the metrics
    (`recon_batch.view(args.batch_size, ...)`): rebinding them would hand that code N
    processes' rows."""
    metric_ids = {id(s) for s in statements}
    chain = {id(loop.bound[n][2]) for n in metric_chain(loop, statements)}
    start = loop.order[id(after)] if after is not None else -1  # None: gathered at the top of the body
    reads: set[str] = set()
    for stmt, _ in loop.lines[start + 1:]:
        if id(stmt) in chain:
            continue  # `pred = output.argmax(1)`: computed for the metrics, from the gathered values
        if isinstance(stmt, cst.SimpleStatementLine):
            parts: list[cst.CSTNode] = [s for s in stmt.body if id(s) not in metric_ids]
        else:
            parts = [getattr(stmt, a) for a in ("test", "iter", "items") if getattr(stmt, a, None) is not None]
            parts = [p for part in parts for p in (part if isinstance(part, (list, tuple)) else [part])]
        for part in parts:
            reads |= {n.value for n in names_in(part)}
    return [n for n in names if n in reads]
