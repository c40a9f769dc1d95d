"""AM215: `dist.barrier()` instead of `accelerator.wait_for_everyone()`."""

from __future__ import annotations

import libcst as cst

from migrator.cst import attr_call
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule


class DistBarrier(Rule):
    """## What it does
    Rewrites `torch.distributed.barrier()` (under any import alias) to
    `accelerator.wait_for_everyone()`.

    ## Why is this bad?
    `dist.barrier()` raises on one process, where no process group exists;
    `wait_for_everyone()` returns at once there and waits for every process otherwise.

    ## Example
    ```python
    dist.barrier()
    ```

    Use instead:
    ```python
    accelerator.wait_for_everyone()
    ```

    ## Known limits
    A barrier with arguments (a process group, a timeout) is reported, not changed.
    """

    code = "AM215"
    name = "dist-barrier"
    message = "`{call}` needs a process group; use `accelerator.wait_for_everyone()`{note}"
    fix_title = "Use `accelerator.wait_for_everyone()`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch.distributed as dist\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "dist.barrier()\n"
            ),
            after="from runtime import Accelerator\n\naccelerator = Accelerator()\naccelerator.wait_for_everyone()\n",
            at=("5:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        facts = analysis.patterns.distribution
        for call in facts.barriers:
            shown = cst.Module([]).code_for_node(call).strip()
            accelerator = analysis.accelerator_at(call)
            if accelerator is None or call.args:
                why = "it takes a process group or device ids" if call.args else "the Accelerator cannot be reached from here"
                self.report(call, call=shown, note=f" (left as written: {why})")
                continue
            new = attr_call(accelerator, "wait_for_everyone")
            self.report(call, edits=[replace(call, new)], remove_imports=facts.import_cleanup, call=shown, note="")
