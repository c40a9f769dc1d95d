"""AM951: the migration would prepare only part of a training set-up; the file is left as written."""

from __future__ import annotations

from migrator.rule import Example, Rule


class MigrationPartialSetup(Rule):
    """## What it does
    Reported by the engine's verifier. A training set-up is whole when the models the
    optimizers update, the optimizers, and the loaders the training loop draws from are
    prepared by one Accelerator, and prepare() is given only objects it can prepare. When
    a migration would prepare part of it (the optimizer but not the model built in
    another scope, the model but not the loader behind a helper, a `tqdm` object instead
    of its loader), the whole file is left as written and this finding names the part.

    ## Why is this bad?
    A half-prepared set-up runs without an error and trains wrongly: an unprepared model
    is not wrapped in DDP, so N processes train N unsynchronised copies; an unprepared
    loader is not sharded, so every process reads the whole data set and an epoch costs N
    times the steps.

    ## Example
    ```python
    encoder = Encoder()          # module level

    def train(loader):
        optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1)
        ...
    ```
    Preparing `optimizer` inside `train()` would leave `encoder` unprepared.

    Use instead: build the model, optimizer and loader in one scope (or pass them in), so
    one `prepare()` call takes them together:
    ```python
    def train(encoder, loader):
        optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1)
        encoder, optimizer, loader = accelerator.prepare(encoder, optimizer, loader)
    ```
    """

    code = "AM951"
    name = "migration-partial-setup"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "import torch\n\nencoder = torch.nn.Linear(2, 2)\n\n\ndef train(loader):\n"
                "    optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1)\n"
                "    for x in loader:\n        loss = encoder(x).sum()\n        loss.backward()\n"
                "        optimizer.step()\n"
            ),
            at=("7:17",),
        ),
    )
