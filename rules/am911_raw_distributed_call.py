"""AM911: `torch.distributed` calls the migration has no rewrite for."""

from __future__ import annotations

import libcst as cst

from migrator.rule import Example, Rule


class RawDistributedCall(Rule):
    """## What it does
    Reports calls of `torch.distributed` (`all_gather`, `broadcast`, `reduce`,
    `new_group`, ...) in a script being migrated, other than those rewritten by AM213
    (init/destroy), AM215 (barrier), AM216 (all_reduce) and AM217 (get_rank,
    get_world_size).

    ## Why is this bad?
    They need a process group: on one process (`python train.py`, the CPU) they raise,
    and under the launcher they bypass what the Accelerator knows (the padding it added
    to even out the last batch, for instance).

    ## What to do by hand
    Use the Accelerator's collectives: `accelerator.gather(t)` (or
    `gather_for_metrics` for evaluation outputs), `accelerator.reduce(t)`,
    `accelerator.pad_across_processes(t)`, and `accelerate.utils.broadcast` where the
    target is Accelerate; guard anything else with `if accelerator.num_processes > 1:`.

    ## Example
    ```python
    dist.all_gather(outputs, output)
    ```

    Use instead:
    ```python
    outputs = accelerator.gather(output)
    ```
    """

    code = "AM911"
    name = "raw-distributed-call"
    message = "`{call}` needs a process group the migration does not manage; use the Accelerator's collectives"
    examples = (
        Example(
            before=(
                "import torch\nimport torch.distributed as dist\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nx = torch.zeros(2)\nxs = [torch.zeros(2)]\ndist.all_gather(xs, x)\n"
            ),
            at=("8:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        for call in analysis.patterns.distribution.raw_calls:
            self.report(call, call=cst.Module([]).code_for_node(call.func).strip() + "()")
