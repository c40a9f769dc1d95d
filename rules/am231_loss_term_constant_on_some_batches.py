"""AM231: a loss term that is a constant tensor on some batches leaves a part without gradient."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.constant_terms import constant_terms
from migrator.analysis.reach import RUN_CALLS_IT, run_by_other_files
from migrator.rule import Example, Rule


class LossTermConstantOnSomeBatches(Rule):
    """## What it does
    Reports a loss (a function, or a method of a class, named for a loss or a criterion)
    that collects a term as a fresh constant tensor under a test and as a computed value
    otherwise (`regression_losses.append(torch.tensor(0).float())` for an image without a
    positive anchor), and returns it. Nothing is changed; in a file being migrated the
    migration is left as written (AM960).

    ## Why is this bad?
    On a batch where every sample takes the constant branch, the loss does not depend on
    the outputs that term reads (a detector's regression head): their parameters get no
    gradient. One process only skips an update of that head; under DistributedDataParallel
    every process waits for every parameter's gradient, and the next step stops with
    "Expected to have finished reduction in the prior iteration".

    ## Example
    ```python
    class BoxLoss(nn.Module):
        def forward(self, boxes, targets, positive):
            if positive.sum() == 0:
                loss = torch.tensor(0.0)
            else:
                loss = F.smooth_l1_loss(boxes[positive], targets[positive])
            return loss
    ```

    Use instead: create the Accelerator with
    `kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)]` (what one
    process does), or keep the outputs in the graph with a zero (`loss = boxes.sum() * 0`)
    at every constant: cheaper for DDP, but the zero gradient still moves those weights
    under momentum or Adam. A file that already passes `find_unused_parameters=True` (to
    the Accelerator or a hand-made wrap the migration carries over) is not reported.

    ## Known limits
    Only a list appended to or a name bound in the loss function itself, returned by it;
    a constant built by another function is not followed. In a file given no Accelerator,
    only a loss the run's other files call is reported.
    """

    code = "AM231"
    name = "loss-term-constant-on-some-batches"
    message = (
        "`{target}` in `{function}` is the constant `{value}` on some batches, so the outputs its other "
        "values read get no gradient there and DDP would stop at the next step: pass "
        "`DistributedDataParallelKwargs(find_unused_parameters=True)` to the Accelerator, or keep them in the "
        "graph with a zero (`output.sum() * 0`) at every such place (a zero gradient: an optimizer with momentum "
        "or Adam still moves those weights, which one process did not){note}"
    )
    examples = (
        Example(
            before=(
                "import torch\nimport torch.nn.functional as F\n\n\n"
                "def box_loss(boxes, targets, positive):\n"
                "    if positive.sum() == 0:\n        loss = torch.tensor(0.0)\n"
                "    else:\n        loss = F.smooth_l1_loss(boxes[positive], targets[positive])\n"
                "    return loss\n\n\n"
                "model = torch.nn.Linear(4, 4)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "x = torch.randn(8, 4)\nloss = box_loss(model(x), x, x[:, 0] > 0)\nloss.backward()\n"
            ),
            after=None,
            at=("7:16",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        config = self.ctx.config
        shared = not analysis.migrating and bool(config.run_callers)
        if not analysis.migrating and not shared:
            return
        method_of = analysis.facts.method_of

        def owner(function: cst.FunctionDef) -> str:
            cls = method_of.get(id(function))
            return cls.name.value if cls is not None else ""

        if any(_allows_unused(c.node) for c in analysis.facts.calls):
            return  # the Accelerator or the hand-made wrap already lets parameters go without a gradient
        functions = analysis.nodes("FunctionDef")
        for term in constant_terms(functions, analysis.parent, owner):  # type: ignore[arg-type]
            if shared and not run_by_other_files(analysis, term.value, config.run_callers, config.project_unpassed):
                continue
            name = term.function.name.value
            where = f"{owner(term.function)}.{name}" if owner(term.function) else name
            value = cst.Module([]).code_for_node(term.value)
            note = f" ({RUN_CALLS_IT}; fix it here)" if shared else ""
            self.report(term.value, target=term.target, function=where, value=value if len(value) <= 40 else "tensor", note=note)


def _allows_unused(call: cst.Call) -> bool:
    """`DistributedDataParallelKwargs(find_unused_parameters=True)`, `DDP(model, find_unused_parameters=True)`."""
    return any(
        a.keyword is not None and a.keyword.value == "find_unused_parameters"
        and isinstance(a.value, cst.Name) and a.value.value == "True"
        for a in call.args
    )
