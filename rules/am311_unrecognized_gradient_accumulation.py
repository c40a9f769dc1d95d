"""AM311: hand-written gradient accumulation the migrator leaves as it is."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.options import option_status
from migrator.rule import Example, Rule


class UnrecognizedGradientAccumulation(Rule):
    """## What it does
    Reports loops that accumulate gradients by hand in a shape AM310 does not rewrite,
    with the reason: the step condition counts something other than the loop's
    enumerate() index (`global_step`), the loss is not divided by the same N (or not at
    all), N is not known where the Accelerator is created, or the loop cannot reach the
    Accelerator.

    ## Why is this bad?
    The loop runs, but on N processes every micro step all-reduces the gradients, and
    mixed with `accelerator.backward` (which divides by
    `gradient_accumulation_steps`) the gradients can be scaled twice.

    ## What to do by hand
    Create the Accelerator with `gradient_accumulation_steps=N`, wrap the body of the
    batch loop in `with accelerator.accumulate(model):`, drop the division of the loss,
    and step the optimizer unconditionally (or under `if accelerator.sync_gradients:`).
    Where the loss is not divided at all, the step applies the sum of the micro-batches'
    gradients, which stays right under DDP: the finding says to keep it (`accumulate()`
    would turn the sum into a mean), with `accelerator.no_sync(model)` between steps to
    save the communication.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y) / accum
        loss.backward()
        global_step += 1
        if global_step % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```

    Use instead:
    ```python
    for x, y in loader:
        with accelerator.accumulate(model):
            loss = criterion(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
    ```
    """

    code = "AM311"
    name = "unrecognized-gradient-accumulation"
    message = "Gradient accumulation left as written: {reason}; {advice}"
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "step = 0\nfor x in [torch.zeros(1, 2)]:\n    loss = model(x).sum() / 4\n"
                "    accelerator.backward(loss)\n    step += 1\n    if step % 4 == 0:\n        opt.step()\n"
            ),
            at=("12:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        _, _, problem = option_status(analysis, "gradient_accumulation_steps")
        for acc in analysis.patterns.accumulations:
            reason = acc.reason
            if reason is None and analysis.accelerator_at(acc.loop) is None:
                reason = "the Accelerator cannot be reached from this loop"
            if reason is None and problem is not None:
                reason = problem
            if reason is not None:
                self.report(acc.anchor, reason=reason, advice=_SUMMED if not acc.divisions else _BY_HAND)


_BY_HAND = "wrap the step in accelerator.accumulate() by hand"
# no division: the step applies the sum of the micro-batches' gradients, which stays right
# under DDP (each backward's gradients are averaged over the processes, then added up);
# accumulate() would make it their mean
_SUMMED = (
    "as written, each step applies the sum of the micro-batches' gradients (no division), which DDP "
    "keeps right and accelerator.accumulate() would turn into their mean: keep it, and skip the gradient "
    "all-reduce between steps with `accelerator.no_sync(model)` if the communication matters"
)
