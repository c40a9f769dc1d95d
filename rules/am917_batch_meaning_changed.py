"""AM917: after the migration, the batch size means something else."""

from __future__ import annotations

from migrator.rule import Example, Rule


class BatchMeaningChanged(Rule):
    """## What it does
    Reported by the engine's verifier beside a migration it writes: the original split
    each batch across GPUs (`nn.DataParallel`) or divided a global batch by the number of
    processes (`args.batch_size // world_size`), and after the migration each process
    takes a whole `batch_size`. The migration is kept; the finding says the meaning of
    the batch size (and of a learning rate tuned for it) changed.

    ## Why is this bad?
    On N processes the global batch becomes N times larger with the same learning rate:
    a different training run. Many users want exactly that (N times the throughput), so
    it is said, not refused.

    ## Example
    ```python
    model = nn.DataParallel(model)
    loader = DataLoader(dataset, batch_size=args.batch_size)
    ```

    Use instead: keep the global batch by dividing it:
    ```python
    loader = DataLoader(dataset, batch_size=args.batch_size // accelerator.num_processes)
    ```
    """

    code = "AM917"
    name = "batch-meaning-changed"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "import torch\n\nmodel = torch.nn.DataParallel(Net())\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            ),
            refused=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\nmodel = Net()\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\n"
            ),
            at=("3:9",),
        ),
    )
