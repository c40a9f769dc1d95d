"""AM957: the migration would make only the main process wait in a collective."""

from __future__ import annotations

from migrator.rule import Example, Rule


class MigrationMainOnlyCollective(Rule):
    """## What it does
    Reported by the engine. When the migrated script would reach a collective
    (`accelerator.gather_for_metrics()`, `wait_for_everyone()`, `main_process_first()`,
    `reduce()`, ...) inside `if accelerator.is_main_process:`, directly or through a
    function of the same file the branch calls, and the original had no such wait there,
    the whole file is left as written and this finding says why. AM901 is the lint's view
    of the same hang where a user wrote it.

    ## Why is this bad?
    A collective returns only when every process has called it; the other processes never
    enter the branch, so the main process waits for them until the timeout and the run
    hangs on N processes while it works on one. An evaluation the original ran on its
    rank 0 only (`if dist.get_rank() == 0: evaluate(model, loader)`) is the usual cause:
    migrated, `evaluate()` gathers its metrics from every process.

    ## Example
    ```python
    def evaluate(model, loader):
        correct = 0
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
        return correct

    if torch.distributed.get_rank() == 0:
        print(evaluate(model, loader))
    ```

    Use instead: evaluate on every process and print on the main one, then migrate:
    ```python
    correct = evaluate(model, loader)
    if torch.distributed.get_rank() == 0:
        print(correct)
    ```
    """

    code = "AM957"
    name = "migration-main-only-collective"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "import torch\n\n\ndef evaluate(model, loader):\n    correct = 0\n"
                "    for x, y in loader:\n        correct += (model(x).argmax(1) == y).sum().item()\n"
                "    return correct\n\n\ndef main():\n"
                "    model = torch.nn.Linear(2, 2)\n"
                "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "    data = torch.utils.data.TensorDataset(torch.randn(8, 2), torch.randint(0, 2, (8,)))\n"
                "    loader = torch.utils.data.DataLoader(data, batch_size=4)\n"
                "    for x, y in loader:\n"
                "        torch.nn.functional.cross_entropy(model(x), y).backward()\n"
                "        opt.step()\n"
                "    if torch.distributed.get_rank() == 0:\n"
                "        print(evaluate(model, loader))\n"
            ),
            at=("20:1",),
        ),
    )
