"""AM503: metrics summed over a prepared evaluation loader without gathering them."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.analysis.branches import accelerator_method
from migrator.rule import Example, Rule

_GATHERS = {"gather", "gather_for_metrics", "reduce", "gather_object"}


class MetricsWithoutGather(Rule):
    """## What it does
    In an evaluation loop (a loop without `backward`) over a prepared dataloader, reports
    the running metrics a process keeps to itself: `correct += (pred == y).sum().item()`,
    `total += y.size(0)`, `losses.append(loss.item())`, `confusion[pred, y] += 1`,
    `stats["loss"] += loss.item()` into names that live outside the loop, when nothing in
    the loop calls `accelerator.gather_for_metrics` / `gather` / `reduce` and the total is
    not gathered or reduced after the loop. Counting batches (`steps += 1`) is not
    reported.

    ## Why is this bad?
    A prepared dataloader gives each of N processes 1/N of the evaluation set. Without a
    gather each process reports the accuracy of its own shard — N different numbers, none
    of them the accuracy of the model — and `total` is 1/N of the dataset. A plain
    `gather` is not enough either: the last batch is padded with repeated samples so that
    every process gets one; `gather_for_metrics` drops them.

    ## Example
    ```python
    for x, y in eval_loader:
        pred = model(x).argmax(dim=1)
        confusion[pred, y] += 1
    ```

    Use instead:
    ```python
    for x, y in eval_loader:
        pred = model(x).argmax(dim=1)
        pred, y = accelerator.gather_for_metrics((pred, y))
        confusion[pred, y] += 1
    ```

    ## Known limits
    Lint only. Loops that the migration's metrics analysis recognises are reported, with
    a fix that inserts the gather, by AM513 (ungathered-metrics) and AM514
    (ungatherable-metrics) instead; this rule reports the running totals they do not
    model. A loader passed in as a parameter is taken as prepared when the file prepares
    dataloaders.

    ## See also
    - huggingface/accelerate#226 and #350: metrics computed from per-process or padded
      predictions count more samples than the dataset has
      (https://github.com/huggingface/accelerate/issues/226)
    - huggingface/accelerate#575: `gather_for_metrics` exists because gathering by hand
      computed wrong metrics in distributed runs
    """

    code = "AM503"
    name = "metrics-without-gather"
    message = "`{shown}` counts only this process's share of `{loader}`: gather with `accelerator.gather_for_metrics` first"
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(4, 2)\n"
                "loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4)))\n"
                "model, loader = accelerator.prepare(model, loader)\nconfusion = torch.zeros(2, 2)\n"
                "for (x,) in loader:\n    pred = model(x).argmax(1)\n    confusion[pred, 0] += 1\n"
            ),
            at=("11:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.has_accelerator or not analysis.prepare_calls:
            return
        prepared = {t for p in analysis.prepare_calls for t in p.targets if t}
        training = {id(loop) for c in analysis.facts.calls if _is_backward(c.node) for loop in c.loops}
        # loops the migration's metrics analysis recognises are AM513's (with a fix) and AM514's
        gathers = analysis.patterns.metrics if analysis.patterns is not None else ()
        covered_loops = {id(g.loop) for g in gathers if g.reason is not None}
        self._covered = {id(s) for g in gathers if g.reason is None for s in g.statements}
        for loop in analysis.facts.loops:
            name = loop.iter_name
            if id(loop.node) in training or id(loop.node) in covered_loops or analysis.roles.of(name) is not Role.DATALOADER:
                continue
            from_param = analysis.facts.loader_parameter(loop.scope, name)
            if name not in prepared and not from_param:
                continue
            self._check_loop(loop.node, name)

    def _check_loop(self, loop: cst.For, loader: str) -> None:
        inside = _Inside()
        loop.body.visit(inside)
        if any(self._is_gather(c) for c in inside.calls):
            return
        for statement in _statements(loop.body):
            for small in statement.body:
                if id(small) in self._covered:
                    continue
                target = self._accumulator(small, loop, inside.statements)
                if target is not None and not self._gathered_later(target, loop):
                    if isinstance(small, cst.AugAssign):
                        shown = f"{target}[...] += ..." if isinstance(small.target, cst.Subscript) else f"{target} += ..."
                    else:
                        shown = f"{target}.{small.value.func.attr.value}(...)"
                    self.report(small, shown=shown, loader=loader)

    def _accumulator(self, small: cst.BaseSmallStatement, loop: cst.For, inside: set[int]) -> str | None:
        """The outside name a statement adds this batch's values to, if any."""
        if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
            target = small.target
            if isinstance(target, cst.Subscript):  # confusion[pred, y] += 1, stats["loss"] += ...
                name = dotted_name(target.value)
            elif isinstance(small.value, (cst.Integer, cst.Float)):
                return None  # counting batches
            else:
                name = dotted_name(target)
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = small.value.func
            if not (isinstance(func, cst.Attribute) and func.attr.value in {"append", "extend"}):
                return None
            name = dotted_name(func.value)
        else:
            return None
        if name is None or name in _loop_targets(loop):
            return None
        if any(b.name == name and id(b.statement) in inside for b in self.analysis.facts.bindings):
            return None  # a name made anew in the loop: not a running total
        return name

    def _gathered_later(self, name: str, loop: cst.For) -> bool:
        """`total = accelerator.reduce(torch.tensor(total))` after the loop."""
        analysis = self.analysis
        scope = analysis.scope_of(loop)
        end = analysis.position(loop).end.line
        head = name.split(".")[0]
        for fact in analysis.facts.calls:
            if fact.scope is scope and self._is_gather(fact.node) and analysis.position(fact.node).start.line > end:
                if any(_mentions(a.value, head) for a in fact.node.args):
                    return True
        return False

    def _is_gather(self, call: cst.Call) -> bool:
        analysis = self.analysis
        if accelerator_method(call, analysis.accelerator_names) in _GATHERS:
            return True
        reducers = {spelling for spelling, kind, *_ in self.ctx.config.project_distribution if kind == "reduced"}
        if dotted_name(call.func) in reducers:
            return True  # another file's helper all-reduces it (project/dist_helpers.py)
        qualified = analysis.imports.qualify(call.func) or ""
        return qualified.rsplit(".", 1)[-1] in {"all_reduce", "all_gather", "gather", "reduce", "gather_object"} and (
            qualified.startswith(("torch.distributed", "accelerate"))
        )


class _Inside(cst.CSTVisitor):
    """The calls and the statements (ids) of a loop body."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[cst.Call] = []
        self.statements: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.For)):
            self.statements.add(id(node))
        return super().on_visit(node)


def _is_backward(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward"


def _statements(block: cst.BaseSuite):
    """The simple statement lines of a loop body, including nested blocks (not functions)."""
    if isinstance(block, cst.SimpleStatementSuite):
        yield block
        return
    for stmt in block.body:  # type: ignore[attr-defined]
        if isinstance(stmt, cst.SimpleStatementLine):
            yield stmt
        elif isinstance(stmt, (cst.If, cst.With, cst.Try, cst.For, cst.While)):
            yield from _statements(stmt.body)
            orelse = getattr(stmt, "orelse", None)
            while isinstance(orelse, (cst.If, cst.Else)):
                yield from _statements(orelse.body)
                orelse = getattr(orelse, "orelse", None)


def _loop_targets(loop: cst.For) -> set[str]:
    names: set[str] = set()

    class _Find(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.add(node.value)

    loop.target.visit(_Find())
    return names


def _mentions(expr: cst.CSTNode, name: str) -> bool:
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found
            found = found or node.value == name

    expr.visit(_Find())
    return found
