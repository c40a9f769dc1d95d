"""AM104: `len(dataloader)` taken before the dataloader is prepared."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.rule import Example, Rule


class LenBeforePrepare(Rule):
    """## What it does
    Reports `len(loader)` of a dataloader that runs before `accelerator.prepare()`
    returns the prepared loader, except where the length only sizes a scheduler that is
    itself passed to `prepare()` (Accelerate's convention, correct there: the prepared
    scheduler steps once per process).

    ## Why is this bad?
    On N processes each process gets 1/N of the batches. A length taken before
    `prepare()` counts every process's batches, so a step count, loop bound, progress
    bar or unprepared scheduler sized from it is N times too long: the learning rate
    never reaches the end of its schedule and the progress bar stops at 1/N.

    ## Example
    ```python
    total_steps = epochs * len(train_loader)
    model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)
    ```

    Use instead:
    ```python
    model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)
    total_steps = epochs * len(train_loader)
    ```

    ## Known limits
    The migrator avoids this by where it puts `prepare()`; this finding is what remains
    when placement could not (the length is needed before the model exists).
    """

    code = "AM104"
    name = "len-before-prepare"
    message = "len({loader}) is taken before prepare(): on N processes it counts all processes' batches"
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "loader = torch.utils.data.DataLoader(range(8))\nsteps = len(loader)\n"
                "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, opt, loader = accelerator.prepare(model, opt, loader)\n"
            ),
            after=None,
            at=("6:9",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.prepare_calls:
            return
        for use in analysis.lens:
            prepares = [
                p for p in analysis.prepare_calls
                if use.loader in p.targets
                and analysis.scope_of(p.call) is analysis.scope_of(use.call)
            ]
            if not prepares:
                continue
            first = min(analysis.position(p.call).start.line for p in prepares)
            if analysis.position(use.call).start.line >= first:
                continue
            if self._sizes_prepared_scheduler(use.call):
                continue
            self.report(use.call, loader=use.loader)

    def _sizes_prepared_scheduler(self, call: cst.Call) -> bool:
        """The length feeds only schedulers that prepare() receives (directly or through
        one variable)."""
        analysis = self.analysis
        prepared_args = {a for p in analysis.prepare_calls for a in p.args if a}
        small = analysis.statement_of(call)
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            return False
        name = dotted_name(small.targets[0].target)
        if name is None:
            return False
        if analysis.roles.of(name) is Role.SCHEDULER:
            return name in prepared_args
        users = [
            b.name for b in analysis.facts.bindings
            if b.value is not None and b.scope is analysis.scope_of(call) and _mentions(b.value, name)
        ]
        return bool(users) and all(
            analysis.roles.of(u) is Role.SCHEDULER and u in prepared_args for u in users
        )


def _mentions(expr: cst.CSTNode, name: str) -> bool:
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found
            found = found or node.value == name

    expr.visit(_Find())
    return found
