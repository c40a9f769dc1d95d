"""AM214: `if rank == 0:` and its variants, by hand."""

from __future__ import annotations

import libcst as cst

from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule


UNREACHABLE = " (left as written: the Accelerator cannot be reached from here; pass it in or create it earlier)"


class RankZeroCheck(Rule):
    """## What it does
    Rewrites tests for the main process written by hand to the Accelerator's:
    `rank == 0`, `args.local_rank in (-1, 0)`, `dist.get_rank() == 0`,
    `not args.distributed or rank == 0`, `args.rank % ngpus_per_node == 0` become
    `accelerator.is_main_process`, and their negations (`args.local_rank not in [-1, 0]`,
    `rank != 0`) `not accelerator.is_main_process`. Only the test changes; the code it
    guards stays.

    ## Why is this bad?
    The hand-written rank comes from arguments or environment variables the migrated
    script no longer reads (`--local_rank`, `RANK`), so under the launcher the test is
    true on every process, or on none: N processes write the same checkpoint, or nobody
    logs.

    ## Example
    ```python
    if args.local_rank in (-1, 0):
        torch.save(model.state_dict(), path)
    ```

    Use instead:
    ```python
    if accelerator.is_main_process:
        torch.save(model.state_dict(), path)
    ```

    ## Known limits
    `local_rank == 0` (main process of each machine) also becomes `is_main_process`
    (main process of the run), as the scripts that write it mean "log once". Where the
    Accelerator cannot be reached (module-level code above `main()`), the test is
    reported, not changed.
    """

    code = "AM214"
    name = "rank-zero-check"
    message = "`{test}` tests the rank by hand; use `accelerator.is_main_process`{note}"
    fix_title = "Use `accelerator.is_main_process`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "rank = 0\nif rank == 0:\n    print(\"main\")\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "rank = 0\nif accelerator.is_main_process:\n    print(\"main\")\n"
            ),
            at=("6:4",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        for test in analysis.patterns.distribution.rank_tests:
            shown = cst.Module([]).code_for_node(test.node).strip()
            accelerator = analysis.accelerator_at(test.node)
            if accelerator is None:
                self.report(test.node, test=shown, note=UNREACHABLE)
                continue
            flag = f"{accelerator}.is_main_process"
            new = cst.parse_expression(flag if test.main else f"not {flag}")
            new = new.with_changes(lpar=test.node.lpar, rpar=test.node.rpar)
            self.report(test.node, edits=[replace(test.node, new)], test=shown, note="")
