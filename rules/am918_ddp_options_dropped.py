"""AM918: the hand-made DDP wrap set an option that prepare() does not."""

from __future__ import annotations

from migrator.rule import Example, Rule


class DdpOptionsDropped(Rule):
    """## What it does
    Reported by the engine's verifier beside a migration it writes: the
    `DistributedDataParallel(...)` wrap the migration removes set one of the options
    `DistributedDataParallelKwargs` takes (`find_unused_parameters`, `broadcast_buffers`,
    `static_graph`, `bucket_cap_mb`, `gradient_as_bucket_view`, `check_reduction`, `dim`)
    to something other than DDP's default, and the migrated Accelerator is not given it.

    The migration carries these options over: AM001 creates
    `Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])`
    with the non-default options of the wrap. This note is left where an option could not
    be carried: its value reads a name not bound where the Accelerator is created
    (`find_unused_parameters=args.unused` with `args` parsed later), two wraps disagree,
    the wrap took its options as `**options`, or the script already had an Accelerator
    of its own.

    ## Why is this bad?
    `find_unused_parameters=True` lets a model with parameters that get no gradient train
    under DDP; without it such a model stops at the second step with DDP's error about
    unfinished reductions. `broadcast_buffers=False` keeps each process's BatchNorm
    statistics its own; with the default, rank 0's are copied to all at every forward.

    ## Example
    ```python
    model = DistributedDataParallel(model, device_ids=[rank], find_unused_parameters=flag)
    ```
    where `flag` is bound after the point the Accelerator is created.

    Use instead: give the Accelerator the option by hand:
    ```python
    from runtime import Accelerator, DistributedDataParallelKwargs

    accelerator = Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=flag)])
    ```

    ## See also
    AM221 (encoder-pooler-unused) asks for `find_unused_parameters=True` for a Hugging
    Face encoder whose pooled output is thrown away.
    """

    code = "AM918"
    name = "ddp-options-dropped"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "import torch\nfrom torch.nn.parallel import DistributedDataParallel\n\n"
                "model = DistributedDataParallel(Net(), find_unused_parameters=flag)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            ),
            refused=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\nmodel = Net()\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\n"
            ),
            at=("4:63",),
        ),
    )
