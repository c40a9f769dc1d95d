"""AM206: a scheduler stepped outside the file is not prepared, and the file says why."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role
from migrator.analysis.plan import STEPPED_ELSEWHERE, contains_len_of, stepped_elsewhere
from migrator.rule import Example, Rule


class SchedulerSteppedElsewhere(Rule):
    """## What it does
    Reports a learning-rate scheduler built in the file but stepped by a function of
    another module (`engine.train_fn(..., scheduler)`), which the migration leaves out of
    `prepare()` because it cannot see whether the scheduler follows batches or epochs.

    ## Why is this bad?
    A scheduler stepped per batch and sized in single-process batches of the whole data
    set (`num_training_steps = len(dataset) / batch_size * epochs`) sees only 1/N of its
    steps on N processes: the schedule stretches N times and never reaches its end. A
    prepared scheduler steps once per process each step and keeps its shape; a scheduler
    stepped per epoch must not be prepared.

    ## Example
    ```python
    num_steps = int(len(df_train) / batch_size * epochs)
    scheduler = get_linear_schedule_with_warmup(optimizer, 0, num_steps)
    engine.train_fn(loader, model, optimizer, device, scheduler)
    ```

    Use instead: when `train_fn` steps it per batch, prepare it:
    ```python
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    ```
    """

    code = "AM206"
    name = "scheduler-stepped-elsewhere"
    message = (
        "`{scheduler}` is stepped outside this file, so it is not prepared: if it steps per batch and "
        "its length counts single-process batches of the whole data set, pass it to prepare() "
        "(on N processes it would otherwise take 1/N of its steps)"
    )
    examples = (
        Example(
            before=(
                "import torch\nimport engine\n\nmodel = torch.nn.Linear(2, 2)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, total_iters=1000)\n"
                "engine.train_fn(model, optimizer, scheduler)\n"
            ),
            at=("6:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.migrating:
            return
        prepared = {a for call in analysis.prepare_calls for a in (*call.args, *call.targets) if a}
        # kept out for a reason of its own (sized from len(dataloader): AM201 says to build it after
        # prepare() from the per-process length); advice to prepare it would contradict that
        left_out = analysis.plan.left_out if analysis.plan is not None else ()
        explained = {name for name, why in left_out if why != STEPPED_ELSEWHERE}
        loaders = set(analysis.roles.names(Role.DATALOADER))
        for name in analysis.roles.names(Role.SCHEDULER):
            if name in prepared or name in explained or not stepped_elsewhere(analysis.facts, name):
                continue
            binding = next((b for b in analysis.facts.bindings if b.name == name), None)
            if binding is None:
                continue
            values = {b.name: b.value for b in analysis.facts.bindings if b.scope is binding.scope and b.value is not None}
            if contains_len_of(binding.value, loaders, values):
                continue  # sized from len(dataloader): AM201 keeps it out, to be built after prepare()
            self.report(binding.statement, scheduler=name)
