"""AM954: the migration would add a required parameter that a caller does not pass."""

from __future__ import annotations

from migrator.rule import Example, Rule


class MigrationBrokenCall(Rule):
    """## What it does
    Reported by the engine's verifier. Threading the Accelerator into a function
    (`def test(model, loader, *, accelerator)`) is right only when every caller passes
    it. When a caller would not (it is in another file of the project, or the function
    has no caller in this file at all), the whole file is left as written and this
    finding names the function.

    ## Why is this bad?
    The caller gets a TypeError (missing keyword-only argument) at run time, typically
    after training, when the evaluation or the save runs.

    ## Example
    ```python
    # train.py, imported by main.py
    def test(model, loader, device):
        ...
    ```

    Use instead: migrate the caller with it (`accel-migrate main.py train.py`), or create
    the set-up in the caller by hand and pass the Accelerator in:
    ```python
    def test(model, loader, device, *, accelerator):
        ...
    test(model, loader, device, accelerator=accelerator)   # main.py
    ```
    """

    code = "AM954"
    name = "migration-broken-call"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before='import torch\n\n\ndef test(model, loader, device):\n    for x in loader:\n        print(model(x.to(device)).sum().item())\n',
            refused='import torch\n\n\ndef test(model, loader, device, *, accelerator):\n    for x in loader:\n        accelerator.print(model(x).sum().item())\n',
            at=("4:1",),
        ),
    )
