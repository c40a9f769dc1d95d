"""AM213: the process group set up and torn down by hand."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.removal import line_of_small
from migrator.cst import attr_call
from migrator.edits import remove, replace
from migrator.rule import Example, FixAvailability, Rule


class InitProcessGroup(Rule):
    """## What it does
    Removes `dist.init_process_group(...)` (with an `if` that only guarded it, such as
    `if args.distributed:`) and turns `dist.destroy_process_group()` into
    `accelerator.end_training()`.

    ## Why is this bad?
    Creating the Accelerator joins the process group the launcher describes (gloo on
    CPU, NCCL on GPU) and `end_training()` leaves it. A second `init_process_group`
    raises "trying to initialize the default process group twice", and the hand-written
    one reads rank and world size from arguments the launcher does not pass.

    ## Example
    ```python
    dist.init_process_group(backend="nccl", init_method="env://")
    ...
    dist.destroy_process_group()
    ```

    Use instead:
    ```python
    ...
    accelerator.end_training()
    ```

    A module-level helper that only leaves the group (`def cleanup():
    dist.destroy_process_group()`) goes, and each `cleanup()` becomes
    `accelerator.end_training()`.

    ## Known limits
    A call used as a value rather than a statement is reported, not removed. Launch the
    migrated script with `accel-launch --nproc-per-node N train.py` (or torchrun) instead
    of the arguments (`--dist-url`, `--world-size`, `--rank`) it used to read.
    """

    code = "AM213"
    name = "init-process-group"
    message = "`{call}` manages the process group by hand; the Accelerator joins and leaves it{note}"
    fix_title = "Remove init_process_group; use accelerator.end_training() to leave"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nimport torch.distributed as dist\n\ndef main():\n"
                "    dist.init_process_group(backend=\"nccl\")\n"
                "    model = torch.nn.Linear(2, 2)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "    dist.destroy_process_group()\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\ndef main():\n"
                "    accelerator = Accelerator()\n"
                "    model = torch.nn.Linear(2, 2)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "    model, opt = accelerator.prepare(model, opt)\n"
                "    accelerator.end_training()\n"
            ),
            at=("5:5", "8:5"),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        facts = analysis.patterns.distribution
        for call in facts.inits:
            fix = facts.removal(analysis.parent(call))  # type: ignore[arg-type]
            note = "" if fix is not None else " (left as written: its result is used; remove the call by hand)"
            self.report(call, edits=fix, call="init_process_group()", note=note)
        for call in facts.destroys:
            small = analysis.parent(call)
            shown = "destroy_process_group()"
            helper = facts.destroy_helpers.get(id(call))
            reached = [analysis.accelerator_at(c) for c in helper[1]] if helper else []
            if helper and all(reached):
                # `def cleanup(): dist.destroy_process_group()`: each `cleanup()` leaves through
                # the Accelerator, and the helper goes
                edits = [remove(helper[0])] + [
                    replace(c.value, attr_call(acc, "end_training")) for c, acc in zip(helper[1], reached)  # type: ignore[attr-defined]
                ]
                self.report(call, edits=edits, remove_imports=facts.import_cleanup, call=shown, note="")
                continue
            if not isinstance(small, cst.Expr):
                self.report(call, call=shown, note=" (left as written: its result is used; call accelerator.end_training() instead)")
                continue
            accelerator = analysis.accelerator_at(call)
            if accelerator is None:
                edits = [remove(line_of_small(small, analysis.parent))]
            else:
                edits = [replace(call, attr_call(accelerator, "end_training"))]
            self.report(call, edits=edits, remove_imports=facts.import_cleanup, call=shown, note="")
