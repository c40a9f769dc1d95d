"""AM201: model, optimizer, dataloaders and scheduler not passed through prepare()."""

from __future__ import annotations

import libcst as cst

from migrator.cst import prepare_statement
from migrator.edits import insert_after
from migrator.rule import Example, FixAvailability, Rule


class UnpreparedObjects(Rule):
    """## What it does
    Finds the model(s), optimizer(s), dataloader(s) and learning-rate scheduler of a
    training script, by construction (`torch.optim.*`, `DataLoader(...)`,
    `torch.optim.lr_scheduler.*`, `get_scheduler`, `nn.Module` subclasses of the file)
    and by use (what the training loop iterates, what `.zero_grad()` is called on, whose
    `.parameters()` feed an optimizer), and inserts one
    `a, b, c = accelerator.prepare(a, b, c)` after their definitions, before their first
    use in training and before any `len(<dataloader>)`.

    ## Why is this bad?
    Unprepared objects stay on one device and one process: the model is not wrapped in
    DistributedDataParallel, every process iterates the whole dataset, and the
    optimizer and scheduler do not know about gradient accumulation or mixed precision.

    ## The learning-rate schedule over the run stays what it was
    A prepared scheduler steps once per process for every optimizer step (Hugging Face
    Accelerate's convention, which our runtime shares), so its schedule follows progress
    through the data. The migrator therefore decides per scheduler:

    - stepped per batch, sized without `len(dataloader)` (e.g. `StepLR(opt, 1000)`):
      passed to `prepare`; on N processes it advances N steps per optimizer step, just
      as the data does;
    - sized from `len(dataloader)` (e.g. `OneCycleLR(opt, total_steps=E * len(loader))`,
      `get_scheduler(..., num_training_steps=E * len(loader))`): built after `prepare`,
      so `len()` is the per-process length, and not passed to `prepare`; it steps once
      per optimizer step and ends exactly at the end of the run;
    - sized by the process count already (`milestones = [s // num_gpus for s in steps]`,
      `total_iters=T / world_size`): the script counts this process's steps itself, so
      it is not passed to `prepare` (prepared, it would advance N times per step);
    - stepped per epoch (`scheduler.step()` outside the batch loop): not passed to
      `prepare`; epochs are the same on any number of processes;
    - stepped in a method with no loop (`update_learning_rate()`) or by another file:
      not passed to `prepare`, and the finding says how often it steps is decided where
      that is called.

    The finding names each scheduler (or loader) left out of `prepare` and why. A loader
    another file's builder hands back sharded with a DistributedSampler (lufficc/SSD's
    `make_data_loader(cfg, distributed=...)`) is left out too: each process reads its
    share already, and prepared it would read 1/N² of the data.

    ## Example
    ```python
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        ...
    ```

    Use instead:
    ```python
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for x, y in loader:
        ...
    ```

    ## Known limits
    A loader also handed to an evaluation of another file of the run that gets no
    Accelerator (it needs all the data) is first bound as it is to `<name>_whole`, which
    that call then reads (AM914).
    Objects created after training has started (an evaluation loader built at the end)
    are not prepared. When a `len(loader)` sits between the dataloaders and the model,
    the dataloaders get a prepare statement of their own above it.
    """

    code = "AM201"
    name = "unprepared-objects"
    message = "{names} not passed through accelerator.prepare(){kept}"
    fix_title = "Insert `accelerator.prepare(...)` after their definitions"
    fix = FixAvailability.ALWAYS
    examples = (
        Example(
            before="import torch\nmodel = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
            after="import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\nmodel = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel, optimizer = accelerator.prepare(model, optimizer)\n",
            at=("3:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        plan = self.analysis.plan
        if plan is None or not self.analysis.migrating:
            return
        indent = "" if isinstance(plan.block.owner, cst.Module) else "    "
        kept = "".join(f"; `{name}` stays out of it ({why})" for name, why in plan.left_out)
        for i, group in enumerate(plan.groups):
            accelerator = self.analysis.accelerator_at(group.after) or self.analysis.accelerator
            statement = prepare_statement(accelerator, group.names, indent)
            twins = [cst.parse_statement(f"{twin} = {loader}\n") for loader, twin in group.twins]
            self.report(
                group.after,
                edits=[insert_after(group.after, *twins, statement)],
                names=", ".join(group.names),
                kept="" if i else kept,
            )
