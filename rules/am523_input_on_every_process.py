"""AM523: `input()` asks the terminal on every launched process."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.reach import run_by_other_files
from migrator.rule import Example, Rule

_PROMPTS = ("input", "raw_input", "builtins.input")


class InputOnEveryProcess(Rule):
    """## What it does
    Finds `input(...)` (and Python 2's `raw_input`) in code every launched process runs:
    a script being migrated, code other files of the run call, or a launched script that
    hands its training to another file (ddim's main.py asking "Folder already exists.
    Overwrite? (Y/N)" before its runner creates the Accelerator). A prompt under a
    main-process test is left alone. Nothing is changed.

    ## Why is this bad?
    Under the launcher every process reaches the prompt. They share one terminal: the
    answer typed goes to one of them, the others wait for ever or read the end of input
    and stop with `EOFError`, and the processes that did get an answer go on to a
    collective the others never reach. What the answer decides (delete a folder, stop
    the run) must be the same on every process.

    ## Example
    ```python
    if os.path.exists(log_path):
        if input("Overwrite? (Y/N)").upper() != "Y":
            sys.exit(0)
    ```

    Use instead: take the answer from an option (`--overwrite`), or ask on the main
    process alone and hand the answer to the others (`accelerator.gather_for_metrics`
    of a tensor holding it, or a file the others read after `wait_for_everyone()`).
    """

    code = "AM523"
    name = "input-on-every-process"
    message = (
        "`{call}()` waits for an answer from the terminal on every process: the launched processes share one, "
        "so one gets the answer and the others wait or stop with EOFError; take the answer from an option, or ask "
        "on the main process and hand the answer to the others"
    )
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "answer = input('Overwrite? (Y/N)')\nmodel = torch.nn.Linear(2, 2)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "loader = torch.utils.data.DataLoader(torch.zeros(4, 2))\n"
                "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
                "for x in loader:\n    optimizer.zero_grad()\n    accelerator.backward(model(x).sum())\n    optimizer.step()\n"
            ),
            at=("5:10",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis, config = self.analysis, self.ctx.config
        shared = not analysis.accelerator_names and bool(config.run_callers)
        launched = not analysis.accelerator_names and bool(config.project_enters or config.project_drives)
        if not (analysis.migrating or shared or launched):
            return
        for fact in analysis.facts.calls:
            if (fact.qualified or fact.func or "") not in _PROMPTS or fact.func not in ("input", "raw_input"):
                continue
            if analysis.branches.runs_only_on_main(fact.node):
                continue
            if shared and not analysis.migrating and not launched:
                if not run_by_other_files(analysis, fact.node, config.run_callers, config.project_unpassed):
                    continue
            self.report(fact.node, call=fact.func)
