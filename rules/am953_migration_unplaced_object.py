"""AM953: a device move would be removed from something the Accelerator does not place."""

from __future__ import annotations

from migrator.rule import Example, Rule


class MigrationUnplacedObject(Rule):
    """## What it does
    Reported by the engine's verifier. `prepare()` places the models it is given and the
    batches a prepared loader yields, and nothing else. When a migration would remove a
    device move from anything else (a model built after `prepare()` for inference, a
    prepared model moved to the CPU to be saved and moved back, tensors that do not come
    from a prepared loader), or would prepare a model the script never put on a device
    while its inputs stay on the CPU, the whole file is left as written and this finding
    names the move.

    ## Why is this bad?
    Two objects end up on different devices: a RuntimeError on a GPU machine, and none on
    a CPU-only one, which is why it slips through tests.

    ## Example
    ```python
    model = Net().to(device)
    ...                                  # training, with prepare(model, ...)
    model = Net().to(device)             # a fresh model for inference
    model.load_state_dict(torch.load("model.pth"))
    x = x.to(device)
    ```

    Use instead: keep the second move, with the Accelerator's device:
    ```python
    model = Net().to(accelerator.device)
    ```
    """

    code = "AM953"
    name = "migration-unplaced-object"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before='import torch\n\ndevice = torch.device("cuda")\nmodel = Net().to(device)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\ntrain(model, optimizer, loader)\nmodel = Net().to(device)\nmodel.load_state_dict(torch.load("model.pth"))\n',
            refused='import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\ndevice = accelerator.device\nmodel = Net()\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel, optimizer, loader = accelerator.prepare(model, optimizer, loader)\ntrain(model, optimizer, loader)\nmodel = Net()\nmodel.load_state_dict(torch.load("model.pth"))\n',
            at=("7:9",),
        ),
    )
