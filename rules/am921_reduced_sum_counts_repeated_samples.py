"""AM921: a sum reduced across processes counts the samples the prepared loader repeats."""

from __future__ import annotations

from migrator.rule import Example, Rule


class ReducedSumCountsRepeatedSamples(Rule):
    """## What it does
    Reported by the engine's verifier beside a migration it writes: a running sum (a
    training loss summed over the epoch) is summed across processes with
    `accelerator.reduce` and then divided by the data set's size, or the running meters of
    an evaluation (AverageMeter) get their sums and counts added up after its loop (AM522).
    The migration is kept; the finding says the figure is a little high. (A training
    loop's meters are not reported: the repeated samples were trained on.)

    ## Why is this bad?
    A prepared loader gives every process the same number of batches, so when the data
    set's size is not a multiple of processes × batch size it repeats a few samples in the
    last batch. `gather_for_metrics` drops those repeats; a reduced sum cannot tell them
    apart, so the average counts them (about 0.3% too high for MNIST on 2 processes).
    Training itself is unaffected.

    ## Example
    ```python
    for x, _ in loader:
        total += loss_fn(model(x), x).item()
    total = accelerator.reduce(torch.tensor(total, device=accelerator.device), reduction="sum").item()
    print(total / len(loader.dataset))
    ```

    Use instead: gather per-sample losses (or per-batch sums with their counts) with
    `accelerator.gather_for_metrics`, which drops the repeated samples, when the printed
    figure must be exact.
    """

    code = "AM921"
    name = "reduced-sum-counts-repeated-samples"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "import torch\n\ntotal = 0.0\nfor x in loader:\n    total += loss_fn(model(x)).item()\n"
                "print(total / len(loader.dataset))\n"
            ),
            refused=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model, loader = accelerator.prepare(model, loader)\n"
                "total = 0.0\nfor x in loader:\n    total += loss_fn(model(x)).item()\n"
                "total = accelerator.reduce(torch.tensor(total, device=accelerator.device), reduction=\"sum\").item()\n"
                "print(total / len(loader.dataset))\n"
            ),
            at=("6:1",),
        ),
    )
