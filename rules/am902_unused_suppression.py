"""AM902: an `# accel-migrate: ignore` comment that silences nothing."""

from __future__ import annotations

from migrator.rule import Example, Rule


class UnusedSuppression(Rule):
    """## What it does
    Reports a suppression comment — `# accel-migrate: ignore` or
    `# accel-migrate: ignore[AM104, tensor-to-device]` — on a line where it silences no
    finding, naming the codes that went unused. A code whose rule did not run (not
    selected, or for another target) is not judged. A comment that lists AM902 itself is
    left alone.

    ## Why is this bad?
    A suppression outlives the code it was written for: once the line is fixed or moved,
    the comment stays and silences the next, unrelated finding that lands on that line —
    including a real bug such as a collective on the main process only. Removing unused
    ones keeps every suppression meaningful.

    ## Example
    ```python
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    steps = len(loader)  # accel-migrate: ignore[AM104]
    ```

    Use instead:
    ```python
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    steps = len(loader)
    ```

    ## Known limits
    Reported by the engine, which alone sees the findings before suppression; so it is
    computed for the rules of this run, on the code as the run leaves it.
    """

    code = "AM902"
    name = "unused-suppression"
    message = "`# accel-migrate: {comment}` silences nothing on this line"
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "loader = torch.utils.data.DataLoader(range(8))\n"
                "loader = accelerator.prepare(loader)\n"
                "steps = len(loader)  # accel-migrate: ignore[AM104]\n"
            ),
            at=("7:22",),
        ),
    )
