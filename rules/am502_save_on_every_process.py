"""AM502: `torch.save` that every process runs."""

from __future__ import annotations

import libcst as cst

from migrator.rule import Example, Rule

_PER_PROCESS = ("rank", "process_index", "local_process_index")


class SaveOnEveryProcess(Rule):
    """## What it does
    In a file that uses an Accelerator, reports `torch.save(...)` that runs on every
    process: not under `if accelerator.is_main_process:` (or another main-process test,
    an early `return` for the other processes, `@accelerator.on_main_process`), and not
    in a function of the file that is only called from such places. A path built from
    the rank (`f"preds_{accelerator.process_index}.pt"`) is a per-process file and is not
    reported.

    ## Why is this bad?
    N processes write the same file at the same time. At best the work is done N times;
    at worst the writes interleave and the checkpoint is corrupt
    (`RuntimeError: storage has wrong size`), which is found only when it is loaded.
    `accelerator.save(obj, path)` writes once, on the main process; `accelerator.save_model`
    and `accelerator.save_state` handle it for you.

    ## Example
    ```python
    torch.save(accelerator.unwrap_model(model).state_dict(), "model.pt")
    ```

    Use instead:
    ```python
    accelerator.save(accelerator.unwrap_model(model).state_dict(), "model.pt")
    ```

    ## Known limits
    A `torch.save` inside a function that this file never calls is not reported: its
    callers decide which processes run it.

    ## See also
    - kakaobrain/scrl#5: a checkpoint corrupted by several processes writing it at once
      (https://github.com/kakaobrain/scrl/issues/5)
    - NVIDIA/apex#886: `save_checkpoint` corrupted when one process per node writes it
    - skorch-dev/skorch#1008: "all processes saving the parameters, when only the main
      process should"
    """

    code = "AM502"
    name = "save-on-every-process"
    message = "`torch.save` runs on every process: N processes write `{path}` at once; use `accelerator.save`"
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "torch.save({\"step\": 1}, \"state.pt\")\n"
                "if accelerator.is_main_process:\n    torch.save({\"step\": 1}, \"state.pt\")\n"
            ),
            at=("5:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.has_accelerator:
            return
        branches = analysis.branches
        for fact in analysis.facts.calls:
            if analysis.imports.qualify(fact.node.func) != "torch.save" or len(fact.node.args) < 2:
                continue
            path = fact.node.args[1].value
            shown = cst.Module([]).code_for_node(path)
            if any(word in shown for word in _PER_PROCESS):
                continue
            branch = branches.branch_of(fact.node)
            if branch is not None:
                continue  # main-only is right; others-only is the collective rules' business
            function = branches.function_of(fact.node)
            if function is not None and (not branches.callers(function) or branches.runs_only_on_main(fact.node)):
                continue
            self.report(fact.node, path=shown if len(shown) <= 40 else "the file")
