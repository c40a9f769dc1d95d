"""AM923: a step interval sized from the data set counts one process's share of batches."""

from __future__ import annotations

from migrator.rule import Example, Rule


class StepIntervalFromDatasetSize(Rule):
    """## What it does
    Reported by the engine's verifier beside a migration it writes: a step counter is
    tested against an interval computed from the data set's size and the batch size
    (`division_step = n_train // (5 * batch_size)` with `n_train = len(dataset) - n_val`,
    then `if global_step % division_step == 0:`). The migration is kept.

    ## Why is this bad?
    After prepare() each process takes 1/N of the batches of an epoch, so its step counter
    grows N times more slowly while the interval still counts the batches of the whole
    data set: whatever runs on that interval (an evaluation five times an epoch, a
    ReduceLROnPlateau stepped there, a log) comes N times less often, or never within an
    epoch on many processes.

    ## Example
    ```python
    division_step = n_train // (5 * batch_size)
    if global_step % division_step == 0:
        evaluate(model, val_loader)
    ```

    Use instead: count the interval in this process's batches,
    `division_step = n_train // (5 * batch_size * accelerator.num_processes)` (or from
    `len(train_loader)` after prepare()).
    """

    code = "AM923"
    name = "step-interval-from-dataset-size"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                'import torch\n'
                '\n'
                'batch_size = 4\n'
                'dataset = torch.utils.data.TensorDataset(torch.zeros(64, 2))\n'
                'loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True)\n'
                'model = torch.nn.Linear(2, 1)\n'
                'optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n'
                'n_train = len(dataset)\n'
                'step = 0\n'
                'for (x,) in loader:\n'
                '    model(x).sum().backward()\n'
                '    optimizer.step()\n'
                '    step += 1\n'
                '    every = n_train // (4 * batch_size)\n'
                '    if step % every == 0:\n'
                '        print("evaluate")\n'
            ),
            refused=(
                'import torch\n'
                'from runtime import Accelerator\n'
                '\n'
                'accelerator = Accelerator()\n'
                '\n'
                'batch_size = 4\n'
                'dataset = torch.utils.data.TensorDataset(torch.zeros(64, 2))\n'
                'loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True)\n'
                'model = torch.nn.Linear(2, 1)\n'
                'optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n'
                'model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n'
                'n_train = len(dataset)\n'
                'step = 0\n'
                'for (x,) in loader:\n'
                '    accelerator.backward(model(x).sum())\n'
                '    optimizer.step()\n'
                '    step += 1\n'
                '    every = n_train // (4 * batch_size)\n'
                '    if step % every == 0:\n'
                '        accelerator.print("evaluate")\n'
            ),
            at=("15:8",),
        ),
    )
