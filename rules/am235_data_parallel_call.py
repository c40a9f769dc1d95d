"""AM235: `nn.parallel.data_parallel(module, inputs)`, one call spread over every GPU."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.reach import RUN_CALLS_IT, run_by_other_files
from migrator.rule import Example, Rule

_CALLS = {"torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel"}


class DataParallelCall(Rule):
    """## What it does
    In a script being migrated, and in code other files of the run call on every
    process, names the functional form of DataParallel, `nn.parallel.data_parallel(module,
    inputs)` (BigGAN-PyTorch samples its generator so under `--parallel`), left as written.

    ## Why is this bad?
    The call copies the module onto every GPU of the machine (`device_ids` defaults to all
    of them) and gathers the outputs on the first. Under `accel-launch` each process owns
    one GPU and its module sits there: on any process but the first the call fails
    ("module must have its parameters and buffers on device cuda:0"), and on the first it
    spreads work onto the GPUs the other processes train on. AM210 removes the wrapper
    form, `nn.DataParallel(model)`; this form runs at each call and has to go by hand.

    ## Example
    ```python
    G_z = nn.parallel.data_parallel(G, (z, y))
    ```

    Use instead:
    ```python
    G_z = G(z, y)
    ```
    (the process's own GPU; the inputs on `accelerator.device`, where data_parallel moved
    them itself).

    ## Known limits
    Only named, never changed: the call also moved its inputs to the first GPU, and a
    direct call needs them on the module's device already, which the script may not do.
    """

    code = "AM235"
    name = "data-parallel-call"
    message = (
        "`{call}(...)` runs `{module}` on every GPU of the machine from one process: under the launcher each process "
        "owns one GPU, so on every process but the first it fails (the module is not on cuda:0); call the module "
        "directly, with its inputs on this process's device{note}"
    )
    examples = (
        Example(
            before=(
                "import torch\nimport torch.nn as nn\n\nmodel = nn.Linear(2, 2)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for x in torch.randn(4, 8, 2):\n    optimizer.zero_grad()\n"
                "    nn.parallel.data_parallel(model, (x,)).sum().backward()\n    optimizer.step()\n"
            ),
            after=None,
            at=("8:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        config = self.ctx.config
        shared = not analysis.migrating and bool(config.run_callers)
        if not analysis.migrating and not shared:
            return
        for fact in analysis.facts.calls:
            if (fact.qualified or "") not in _CALLS or not fact.node.args:
                continue
            if shared and not run_by_other_files(analysis, fact.node, config.run_callers, config.project_unpassed):
                continue
            module = cst.Module([]).code_for_node(fact.node.args[0].value)
            note = f" ({RUN_CALLS_IT})" if shared else " (left as written)"
            self.report(fact.node, call=dotted_name(fact.node.func) or "data_parallel", module=module, note=note)
