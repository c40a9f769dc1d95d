"""AM232: BatchNorm made synchronous across one process's DataParallel replicas only."""

from __future__ import annotations

from migrator.analysis import dotted_name
from migrator.analysis.handed_models import handed_model
from migrator.analysis.reach import RUN_CALLS_IT, run_by_other_files
from migrator.rule import Example, Rule


# the package's two ways in: swap the layers (and wrap), or patch a DataParallel over layers already swapped
_SYNCING = ("convert_model", "patch_replication_callback")
_REMEDIES = {
    "convert_model": (
        "convert it with `torch.nn.SyncBatchNorm.convert_sync_batchnorm(...)` instead, before prepare(), for"
        " statistics over every process's batch; it runs on CUDA tensors only"
    ),
    # the layers are the package's own (BigGAN's take `gain=`/`bias=` in their forward, which
    # torch's SyncBatchNorm does not): converting them is no drop-in change
    "patch_replication_callback": (
        "the model's layers are the package's own: leave the synchronization off under the launcher (each process"
        " normalizes its own batch), or rebuild them as `torch.nn.SyncBatchNorm` where their forward takes only the"
        " input, for statistics over every process's batch (CUDA tensors only)"
    ),
}


class BatchnormSyncedAcrossReplicasOnly(Rule):
    """## What it does
    In a script being migrated, and in code other files of the run call on every process,
    names a `convert_model(model)` of the Synchronized-BatchNorm package (a module named
    `sync_batchnorm`, vendored by many segmentation projects), or its
    `patch_replication_callback(model)` over layers already built synchronized (BigGAN-PyTorch's
    `--cross_replica`), left as written; so does a set-up that hands its model to a
    training left as written.

    ## Why is this bad?
    `convert_model` swaps the model's BatchNorm layers for ones that share their batch
    statistics across the replicas DataParallel makes inside one process (through the
    callbacks of its `DataParallelWithCallback`; `patch_replication_callback` adds those
    callbacks to a plain DataParallel). The migration trains with one replica
    per process, and prepare() wraps it in DistributedDataParallel: the layers then see no
    other replica and normalize each process's batch alone, on a batch N times smaller
    than the one they synchronized over before. The run trains, differently, with
    nothing said. `torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)` synchronizes them
    across processes instead (on CUDA tensors).

    ## Example
    ```python
    from utils.sync_batchnorm import convert_model, DataParallelWithCallback

    model = convert_model(model)
    model = DataParallelWithCallback(model, device_ids=[0, 1])
    ```

    Use instead:
    ```python
    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model, optimizer = accelerator.prepare(model, optimizer)
    ```

    ## Known limits
    Only named, never changed: PyTorch's SyncBatchNorm runs on CUDA tensors only, so the
    change is the user's to make where the run has GPUs. The package is recognized by
    its module name (`sync_batchnorm`); the `DataParallelWithCallback` wrap is AM210's.
    """

    code = "AM232"
    name = "batchnorm-synced-across-replicas-only"
    message = (
        "`{call}` makes BatchNorm share batch statistics across the replicas of one process's DataParallel only; "
        "with one replica per process under prepare(), each process normalizes its own batch alone{note}"
    )
    fix_title = "Convert with `torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)` before prepare()"
    examples = (
        Example(
            before=(
                "import torch\nfrom sync_batchnorm import convert_model\n\n"
                "model = convert_model(torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8)))\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for x in torch.randn(4, 2, 3, 8, 8):\n"
                "    optimizer.zero_grad()\n    model(x).sum().backward()\n    optimizer.step()\n"
            ),
            after=None,
            at=("4:9",),
        ),
        Example(
            before=(
                "import torch\nfrom sync_batchnorm import patch_replication_callback\n\n"
                "model = torch.nn.DataParallel(torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8)))\n"
                "patch_replication_callback(model)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for x in torch.randn(4, 2, 3, 8, 8):\n"
                "    optimizer.zero_grad()\n    model(x).sum().backward()\n    optimizer.step()\n"
            ),
            after=None,
            at=("5:1",),
        ),
    )

    def visit_Module(self, node) -> None:
        analysis = self.analysis
        config = self.ctx.config
        shared = not analysis.migrating and bool(config.run_callers)
        # a set-up that hands its model to a training left as written (BigGAN's train.py) runs on every process too
        if not analysis.migrating and not shared and handed_model(analysis, config) is None:
            return
        for fact in analysis.facts.calls:
            qualified = fact.qualified or ""
            if qualified.rsplit(".", 1)[-1] not in _SYNCING or "sync_batchnorm" not in qualified.split("."):
                continue
            if shared and not run_by_other_files(analysis, fact.node, config.run_callers, config.project_unpassed):
                continue
            remedy = _REMEDIES[qualified.rsplit(".", 1)[-1]]
            note = f" ({RUN_CALLS_IT}; {remedy})" if shared else f" (left as written: {remedy})"
            self.report(fact.node, call=f"{dotted_name(fact.node.func)}()", note=note)
