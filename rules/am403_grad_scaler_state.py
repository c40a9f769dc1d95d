"""AM403: a GradScaler's state saved in (or restored from) checkpoints."""

from __future__ import annotations

import libcst as cst

from migrator.rule import Example, Rule


class GradScalerState(Rule):
    """## What it does
    Reports `scaler.state_dict()` and `scaler.load_state_dict(...)` of a hand-made
    `GradScaler`, once the migration hands loss scaling to the Accelerator.

    ## Why is this bad?
    After the migration the Accelerator's own scaler scales the loss; the hand-made one
    is no longer used, so its state in a checkpoint is that of an idle scaler, and a
    restored one has no effect: a resumed run starts again from the initial loss scale.
    The migrator cannot know how the checkpoint is laid out, so it leaves the code as it
    is (it still runs) and reports it.

    ## What to do by hand
    Save and restore training state with `accelerator.save_state(dir)` /
    `accelerator.load_state(dir)`, which include the scaler; or store
    `accelerator.scaler.state_dict()` (it is None unless `mixed_precision="fp16"`).

    ## Example
    ```python
    torch.save({"model": model.state_dict(), "scaler": scaler.state_dict()}, path)
    ```

    Use instead:
    ```python
    accelerator.save_state(output_dir)
    ```
    """

    code = "AM403"
    name = "grad-scaler-state"
    message = "`{use}` checkpoints a GradScaler the Accelerator replaces; use accelerator.save_state()/load_state() or accelerator.scaler"
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "scaler = torch.cuda.amp.GradScaler()\ntorch.save({\"scaler\": scaler.state_dict()}, \"ckpt.pt\")\n"
            ),
            at=("6:23",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        patterns = analysis.patterns
        if patterns is None or not analysis.migrating:
            return
        for scaler in patterns.precision.scalers:
            for use in scaler.uses:
                if use.kind == "state" and use.call is not None:
                    method = use.call.func.attr.value  # type: ignore[attr-defined]
                    self.report(use.call, use=f"{scaler.name}.{method}()")
