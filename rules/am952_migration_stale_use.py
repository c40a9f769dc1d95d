"""AM952: something the migration wraps, removes or retypes is still used the old way."""

from __future__ import annotations

from migrator.rule import Example, Rule


class MigrationStaleUse(Rule):
    """## What it does
    Reported by the engine's verifier. After `prepare()` the model is a
    DistributedDataParallel wrapper on N processes and the plain module on one; a removed
    DistributedSampler is gone; `device` is a `torch.device`, not a string. When migrated
    code would still use one of them the old way, the whole file is left as written and
    this finding names the use: the model's own methods and attributes
    (`model.decode(z)`, `model.init_hidden(...)`), `.module`, `no_sync()`,
    `state_dict()` / `load_state_dict()` round-trips whose keys gain DDP's `module.`
    prefix, `sampler.set_epoch(...)` after the sampler went, `device == "cuda"`.

    ## Why is this bad?
    Each works on one process count and breaks on another: `model.decode` raises
    AttributeError on the DDP wrapper, `.module` raises on one process, keys with a
    `module.` prefix do not load into a plain module.

    ## Example
    ```python
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    ...
    sample = model.decode(z)
    ```

    Use instead:
    ```python
    sample = accelerator.unwrap_model(model).decode(z)
    ```
    """

    code = "AM952"
    name = "migration-stale-use"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before='import torch\n\nmodel = VAE()\noptimizer = torch.optim.Adam(model.parameters())\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\nsample = model.decode(torch.randn(4, 20))\n',
            refused='import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\nmodel = VAE()\noptimizer = torch.optim.Adam(model.parameters())\nmodel, optimizer, loader = accelerator.prepare(model, optimizer, loader)\nfor x in loader:\n    loss = model(x).sum()\n    accelerator.backward(loss)\n    optimizer.step()\nsample = model.decode(torch.randn(4, 20))\n',
            at=("9:10",),
        ),
    )
