"""AM216: `dist.all_reduce(t)` of a metric instead of `accelerator.reduce`."""

from __future__ import annotations

import libcst as cst

from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule


class DistAllReduce(Rule):
    """## What it does
    Rewrites `dist.all_reduce(t)` and `dist.all_reduce(t, op=dist.ReduceOp.SUM)` to
    `t = accelerator.reduce(t)`, and `op=dist.ReduceOp.AVG` to
    `t = accelerator.reduce(t, reduction="mean")`.

    ## Why is this bad?
    `dist.all_reduce` raises on one process, where no process group exists;
    `accelerator.reduce` returns the tensor unchanged there and sums (or averages) it over
    every process otherwise.

    ## Example
    ```python
    dist.all_reduce(correct, op=dist.ReduceOp.SUM)
    ```

    Use instead:
    ```python
    correct = accelerator.reduce(correct)
    ```

    ## Known limits
    `accelerator.reduce` returns a new tensor rather than changing `t` in place: other
    names bound to the same tensor keep the unreduced value. MAX, MIN and PRODUCT
    reductions, process groups, `async_op=True`, and calls whose result is used are
    reported, not changed.
    """

    code = "AM216"
    name = "dist-all-reduce"
    message = "`dist.all_reduce` needs a process group; use `accelerator.reduce`{reason}"
    fix_title = "Use `t = accelerator.reduce(t)`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nimport torch.distributed as dist\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "correct = torch.zeros(1)\ndist.all_reduce(correct, op=dist.ReduceOp.SUM)\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "correct = torch.zeros(1)\ncorrect = accelerator.reduce(correct)\n"
            ),
            at=("7:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        facts = analysis.patterns.distribution
        for reduce in facts.all_reduces:
            accelerator = analysis.accelerator_at(reduce.call)
            if reduce.reason is not None or accelerator is None or reduce.statement is None or reduce.tensor is None:
                why = reduce.reason or "the Accelerator cannot be reached here"
                self.report(reduce.call, reason=f" (left as written: {why})")
                continue
            tensor = cst.Module([]).code_for_node(reduce.tensor).strip()
            extra = ', reduction="mean"' if reduction_is_mean(reduce.reduction) else ""
            new = cst.parse_statement(f"{tensor} = {accelerator}.reduce({tensor}{extra})\n")
            assign = new.body[0]  # type: ignore[attr-defined]
            self.report(reduce.call, edits=[replace(reduce.statement, assign)], remove_imports=facts.import_cleanup, reason="")


def reduction_is_mean(reduction: str | None) -> bool:
    return reduction == "mean"
