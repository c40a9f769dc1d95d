"""AM918: the hand-made DDP wrap set an option that prepare() does not."""

from __future__ import annotations

from migrator.rule import Example, Rule


class DdpOptionsDropped(Rule):
    """## What it does
    Reported by the engine's verifier beside a migration it writes: the
    `DistributedDataParallel(...)` wrap the migration removes set
    `find_unused_parameters`, `broadcast_buffers` or `static_graph` to something other
    than DDP's default, and `prepare()` wraps with the defaults.

    ## Why is this bad?
    `find_unused_parameters=True` lets a model with parameters that get no gradient train
    under DDP; without it such a model stops at the second step with DDP's error about
    unfinished reductions. `broadcast_buffers=False` keeps each process's BatchNorm
    statistics its own; with the default, rank 0's are copied to all at every forward.

    ## Example
    ```python
    model = DistributedDataParallel(model, device_ids=[rank], find_unused_parameters=True)
    ```

    Use instead: make every parameter take part in the loss (or drop the unused ones),
    then let `prepare()` wrap the model:
    ```python
    model, optimizer = accelerator.prepare(model, optimizer)
    ```
    """

    code = "AM918"
    name = "ddp-options-dropped"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "import torch\nfrom torch.nn.parallel import DistributedDataParallel\n\n"
                "model = DistributedDataParallel(Net(), find_unused_parameters=True)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            ),
            refused=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\nmodel = Net()\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\n"
            ),
            at=("4:63",),
        ),
    )
