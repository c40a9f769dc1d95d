"""AM922: a call that prepares or trains is retried in an `except` handler: one process retries."""

from __future__ import annotations

from migrator.rule import Example, Rule


class TrainingRetriedOnOneProcess(Rule):
    """## What it does
    Reported by the engine's verifier beside a migration it writes: a function of the
    script that, once migrated, prepares objects or trains through the Accelerator
    (`accelerator.prepare`, `accelerator.backward`, a reduce or gather) is called again
    in an `except` handler, the way Pytorch-UNet retries `train_model(...)` with gradient
    checkpointing after `torch.cuda.OutOfMemoryError`. The migration is kept.

    ## Why is this bad?
    An exception is raised on one process: the one that ran out of memory. Only that
    process enters the handler and calls the function again, which prepares a second
    wrapper of the model and steps into collectives the other processes never join; they
    are still waiting in the all-reduce of the step it left. The run hangs instead of
    failing.

    ## Example
    ```python
    try:
        train_model(model, accelerator=accelerator)
    except torch.cuda.OutOfMemoryError:
        model.use_checkpointing()
        train_model(model, accelerator=accelerator)
    ```

    Use instead: let the error stop the run (and relaunch with a smaller batch or
    checkpointing on), or have every process agree on the failure before any retries
    (`accelerator.reduce` of a failure flag after each step).
    """

    code = "AM922"
    name = "training-retried-on-one-process"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                'import torch\n'
                '\n'
                '\n'
                'def train_model(model, loader, optimizer):\n'
                '    for x in loader:\n'
                '        model(x).sum().backward()\n'
                '        optimizer.step()\n'
                '\n'
                '\n'
                'model = torch.nn.Linear(2, 1)\n'
                'optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n'
                'loader = torch.utils.data.DataLoader(torch.zeros(8, 2), batch_size=2)\n'
                'try:\n'
                '    train_model(model, loader, optimizer)\n'
                'except torch.cuda.OutOfMemoryError:\n'
                '    train_model(model, loader, optimizer)\n'
            ),
            refused=(
                'import torch\n'
                'from runtime import Accelerator\n'
                '\n'
                'accelerator = Accelerator()\n'
                '\n'
                '\n'
                'def train_model(model, loader, optimizer):\n'
                '    for x in loader:\n'
                '        accelerator.backward(model(x).sum())\n'
                '        optimizer.step()\n'
                '\n'
                '\n'
                'model = torch.nn.Linear(2, 1)\n'
                'optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n'
                'loader = torch.utils.data.DataLoader(torch.zeros(8, 2), batch_size=2)\n'
                'model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n'
                'try:\n'
                '    train_model(model, loader, optimizer)\n'
                'except torch.cuda.OutOfMemoryError:\n'
                '    train_model(model, loader, optimizer)\n'
            ),
            at=("16:5",),
        ),
    )
