"""AM956: the migration would train a number of steps each process decides for itself."""

from __future__ import annotations

from migrator.rule import Example, Rule


class MigrationUnevenSteps(Rule):
    """## What it does
    Reported by the engine. When the migrated script would run its backward pass inside a
    loop whose length each process decides for itself (AM915: `for t in count(): ... break`
    on a per-process test, `while not done`, a replay buffer's fill level), the whole file
    is left as written and this finding says why; AM915 beside it points at the loop.

    ## Why is this bad?
    DDP all-reduces the gradients in every backward, and every process must call it the
    same number of times. A migration that runs a different number of steps on each
    process hangs on N processes while it works on one, which is exactly the result users
    trust and should not: correct or untouched.

    ## Example
    ```python
    for step in count(1):
        loss = model(next_batch()).sum()
        loss.backward()
        optimizer.step()
        if loss.item() < 1e-3:
            break
    ```

    Use instead: the same number of optimisation steps on every process, e.g. a stopping
    test on a value reduced across processes, then migrate:
    ```python
    for step in count(1):
        loss = model(next_batch()).sum()
        accelerator.backward(loss)
        optimizer.step()
        if accelerator.reduce(loss.detach(), "mean").item() < 1e-3:
            break
    ```
    Or keep the script on one process.
    """

    code = "AM956"
    name = "migration-uneven-steps"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "from itertools import count\n\nimport torch\n\n"
                "model = torch.nn.Linear(4, 1)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for step in count(1):\n"
                "    loss = model(torch.randn(8, 4)).pow(2).mean()\n"
                "    loss.backward()\n"
                "    optimizer.step()\n"
                "    if loss.item() < 1e-3:\n"
                "        break\n"
            ),
            at=("9:5",),
        ),
    )
