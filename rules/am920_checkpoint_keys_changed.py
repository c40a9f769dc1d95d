"""AM920: checkpoints of the hand-wrapped model no longer load into the migrated one."""

from __future__ import annotations

from migrator.rule import Example, Rule


class CheckpointKeysChanged(Rule):
    """## What it does
    Reported by the engine's verifier beside a migration it writes: the original wrapped
    the model in `DataParallel` or `DistributedDataParallel` and then loaded a state dict
    into the wrapper (`model.load_state_dict(checkpoint["state_dict"])`). After the
    migration the load goes into the plain model, which `prepare()` wraps later.

    ## Why is this bad?
    State dicts saved by the wrapper have keys starting with `module.`; the plain model's
    keys do not. Resuming from a checkpoint the script wrote before the migration (or a
    pretrained one made the same way) stops with missing and unexpected keys, on one
    process too.

    ## Example
    ```python
    model = torch.nn.DataParallel(Net())
    model.load_state_dict(torch.load(args.resume)["state_dict"])
    ```

    Use instead: strip the prefix when loading an old checkpoint:
    ```python
    state = torch.load(args.resume)["state_dict"]
    model.load_state_dict({k.removeprefix("module."): v for k, v in state.items()})
    ```
    """

    code = "AM920"
    name = "checkpoint-keys-changed"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "import torch\n\nmodel = torch.nn.DataParallel(Net())\n"
                "model.load_state_dict(torch.load('old.pt'))\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            ),
            refused=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\nmodel = Net()\n"
                "model.load_state_dict(torch.load('old.pt'))\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\n"
            ),
            at=("4:1",),
        ),
    )
