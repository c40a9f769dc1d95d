"""AM104: `len(dataloader)` taken before the dataloader is prepared."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.analysis.served_counts import served_counts
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

    A count of the training data taken from the object that serves the loader
    (`steps_per_epoch = self.parser.get_train_size()` beside `train_loader=
    self.parser.get_train_set()`), sizing a scheduler stepped once per batch, is reported
    the same way: it counts the loader before it is prepared, whatever this file prepares.

    ## Known limits
    The migrator avoids this by where it puts `prepare()`; this finding is what remains
    when placement could not (the length is needed before the model exists).
    """

    code = "AM104"
    name = "len-before-prepare"
    message = "{count} is taken before prepare(): on N processes it counts all processes' batches{note}"
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
        told = set()
        for served in served_counts(analysis):
            if id(served.count) in told:
                continue
            told.add(id(served.count))
            code = cst.Module([]).code_for_node
            note = _SERVED.format(
                loader=code(served.loader), line=analysis.position(served.loader).start.line, scheduler=served.scheduler,
            )
            self.report(served.count, count=code(served.count), note=note)
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
            self.report(use.call, count=f"len({use.loader})", note="")

    def _sizes_prepared_scheduler(self, call: cst.Call) -> bool:
        """The length feeds only schedulers that prepare() receives: directly, or through
        variables (`steps = E * len(loader)`, `args.max_train_steps = steps`) whose every
        read, up to their next assignment, builds such a scheduler."""
        prepared_args = {a for p in self.analysis.prepare_calls for a in p.args if a}
        return self._feeds_only_prepared_schedulers(self.analysis.statement_of(call), prepared_args, 0)

    def _feeds_only_prepared_schedulers(self, small: cst.CSTNode | None, prepared: set[str], depth: int) -> bool:
        analysis = self.analysis
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            return False
        name = dotted_name(small.targets[0].target)
        if name is None:
            return False
        if analysis.roles.of(name) is Role.SCHEDULER:
            return name in prepared
        if depth >= 3:
            return False
        reads = self._reads(name, small)
        return bool(reads) and all(self._feeds_only_prepared_schedulers(r, prepared, depth + 1) for r in reads)

    def _reads(self, name: str, small: cst.Assign) -> list[cst.CSTNode | None]:
        """The statements reading `name` after `small`, before `name` is assigned again."""
        analysis = self.analysis
        scope = analysis.scope_of(small)
        line = analysis.position(small).start.line
        later = [
            analysis.position(b.statement).start.line
            for b in analysis.facts.bindings
            if b.name == name and b.scope is scope and analysis.position(b.statement).start.line > line
        ]
        until = min(later, default=None)
        head = name.split(".")[0]
        reads = []
        for load in analysis.facts.loads:
            if load.name != head or load.scope is not scope:
                continue
            where = analysis.position(load.node).start.line
            if where <= line or (until is not None and where >= until):
                continue
            if _reads_name(analysis, load.node, name):
                reads.append(analysis.statement_of(load.node))
        return reads


_SERVED = (
    " (it counts the batches of `{loader}` (line {line}), the loader the training draws from, and sizes "
    "`{scheduler}`, stepped once per batch: once that loader is prepared, each process steps through 1/N of them "
    "per epoch, and the schedule lasts N times as long; pass the scheduler to prepare() with that loader (a "
    "prepared scheduler steps once for each process), or size it from `len()` of the prepared loader)"
)


def _reads_name(analysis, node: cst.Name, name: str) -> bool:
    """Whether the load `node` (a head name) reads `name`: `args.max_steps` in `args.max_steps * 2`."""
    current: cst.CSTNode = node
    while dotted_name(current) != name:
        up = analysis.parent(current)
        if not (isinstance(up, cst.Attribute) and up.value is current):
            return False
        current = up
    return True
