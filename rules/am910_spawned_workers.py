"""AM910: processes started by the script itself (`mp.spawn`)."""

from __future__ import annotations

import libcst as cst

from migrator.rule import Example, Rule


class SpawnedWorkers(Rule):
    """## What it does
    Reports `torch.multiprocessing.spawn(main_worker, nprocs=..., args=(...))` in a
    script being migrated.

    ## Why is this bad?
    The migrated script is started once per process by the launcher, and the
    Accelerator finds its rank from it. A script that also spawns workers starts N×N
    processes, and its worker function computes ranks from arguments the Accelerator
    ignores. The migrator cannot rewrite it: the worker function's parameters (`gpu`,
    `ngpus_per_node`) are used all through it.

    ## What to do by hand
    Call the worker directly (`main_worker(args)`, dropping the per-process
    parameters) and start the script with `accel-launch --nproc-per-node N train.py`
    (or `torchrun`).

    ## Example
    ```python
    mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))
    ```

    Use instead:
    ```python
    main_worker(args)  # launched as: accel-launch --nproc-per-node 4 train.py
    ```
    """

    code = "AM910"
    name = "spawned-workers"
    message = "`{call}` starts processes itself; call `{worker}` directly and launch with `accel-launch --nproc-per-node N`"
    examples = (
        Example(
            before=(
                "import torch\nimport torch.multiprocessing as mp\n\ndef main_worker(gpu, args):\n"
                "    model = torch.nn.Linear(2, 2)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n\n"
                "def main():\n    mp.spawn(main_worker, nprocs=2, args=(None,))\n"
            ),
            at=("9:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        for call in analysis.patterns.distribution.spawns:
            worker = cst.Module([]).code_for_node(call.args[0].value).strip() if call.args else "the worker"
            self.report(call, call=cst.Module([]).code_for_node(call.func).strip() + "(...)", worker=worker)
