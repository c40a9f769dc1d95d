"""AM955: the migration would leave another distributed engine, or hand-made distribution, running beside the Accelerator."""

from __future__ import annotations

from migrator.rule import Example, Rule


class MigrationKeepsDistribution(Rule):
    """## What it does
    Reported by the engine's verifier. A migrated script has one distributed engine, the
    Accelerator. The whole file is left as written when the script already distributes
    with another engine (Horovod, DeepSpeed, apex, FSDP, fairscale, MPI), or when the
    migration would leave part of the hand-made distribution running beside the
    Accelerator: a `DistributedDataParallel` or `DataParallel` wrap, a
    `DistributedSampler`, `init_process_group`, collectives called by hand
    (`dist.all_reduce(...)`, a meter's `all_reduce()`), or one object prepared under two
    names, or a model another file of the run hands back wrapped in DataParallel
    (`networks.define_G(...)`: its wrap goes first). (`nn.SyncBatchNorm.convert_sync_batchnorm(model)` is kept: SyncBatchNorm works
    under the DDP wrap prepare() makes, and the Accelerator does not convert BatchNorm.)

    ## Why is this bad?
    Two engines do the work twice: gradients all-reduced by DDP and again by hand, data
    sharded by the prepared loader and again by the sampler, a process group the
    Accelerator does not manage. On one process a hand-called collective raises, because
    there is no process group.

    ## Example
    ```python
    import horovod.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    ```

    Use instead: keep the script on Horovod, or convert it by hand: remove `hvd.init()`,
    the `DistributedOptimizer`, the broadcasts and `hvd.rank()` checks, then migrate:
    ```python
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    ```

    ## Known limits
    A collective under `if dist.is_initialized():` and `data_parallel` inside a model's
    `forward` are not refused (the first runs on the Accelerator's group, the second is
    the model's own business and reported by the rules).
    """

    code = "AM955"
    name = "migration-keeps-distribution"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "import torch\nimport torch.distributed as dist\n\nmodel = Net()\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for x in loader:\n    loss = model(x).sum()\n    loss.backward()\n"
                "    dist.all_reduce(loss)\n    optimizer.step()\n"
            ),
            refused=(
                "import torch\nimport torch.distributed as dist\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nmodel = Net()\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
                "for x in loader:\n    loss = model(x).sum()\n    accelerator.backward(loss)\n"
                "    dist.all_reduce(loss)\n    optimizer.step()\n"
            ),
            at=("9:5",),
        ),
    )
