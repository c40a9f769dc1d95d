"""AM960: the migration would wrap a model whose trainable parameters change while training."""

from __future__ import annotations

from migrator.rule import Example, Rule


class MigrationFrozenWhileTraining(Rule):
    """## What it does
    Reported by the engine. When the training freezes or unfreezes parameters after the
    model would be prepared (AM230: a loop over `parameters()` setting `requires_grad`, a
    `requires_grad_(False)`, a helper of another file that does either, run in the
    training loop), the whole file is left as written and this finding says why; AM230
    beside it points at the change.

    ## Why is this bad?
    DistributedDataParallel takes, when prepare() wraps the model, the parameters that
    need a gradient then, and averages exactly those at every step. A layer frozen later
    stops the run at the next step (DDP waits for a gradient that never comes); a layer
    unfrozen later trains on each process without being averaged, and the copies drift
    apart in silence. A migration that only swaps in the Accelerator would do one or the
    other, so it is not written: correct or untouched.

    ## Example
    ```python
    for epoch in range(epochs):
        for p in model.backbone.parameters():
            p.requires_grad = epoch >= warmup
        train_one_epoch(model, loader, optimizer)
    ```

    Use instead: (then migrate) keep every parameter trainable when the model is
    prepared, and create the Accelerator with
    `kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)]`.
    """

    code = "AM960"
    name = "migration-frozen-while-training"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "import torch\n\nmodel = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for epoch in range(4):\n"
                "    for p in model[0].parameters():\n"
                "        p.requires_grad = epoch >= 2\n"
                "    optimizer.zero_grad()\n"
                "    model(torch.randn(2, 4)).sum().backward()\n"
                "    optimizer.step()\n"
            ),
            at=("6:5",),
        ),
    )
