"""AM108: `os.environ["CUDA_VISIBLE_DEVICES"] = ...` chooses the GPUs inside the script."""

from __future__ import annotations

import libcst as cst

from migrator.rule import Example, Rule

_VARIABLE = "CUDA_VISIBLE_DEVICES"


class VisibleDevicesSetByHand(Rule):
    """## What it does
    Reports a script that sets `CUDA_VISIBLE_DEVICES` itself: `os.environ["CUDA_VISIBLE_DEVICES"]
    = args.gpu`, `os.environ.setdefault(...)`, `os.putenv(...)`. Nothing is changed.

    ## Why is this bad?
    Under `accel-launch` every process runs that line and sees the same GPUs, numbered from 0,
    while each one's device comes from its local rank: process 1 asks for `cuda:1` of a
    one-GPU view and fails, or every process lands on the same card. Which GPUs a run uses
    is the launcher's to say: `CUDA_VISIBLE_DEVICES=2,3 accel-launch --nproc-per-node 2 train.py`.

    ## Example
    ```python
    os.environ["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
    ```

    Use instead: drop the line, and choose the GPUs on the command line that launches the run.

    Where the Accelerator already exists when the line runs (a migrated `main()` creates it
    first), CUDA has started on its device and the line does nothing: a GPU asked for with it
    is not the one used, on one process too. The finding says which of the two it is.

    ## Fix safety
    Not removed: on one process the line still picks the card the user asked for with
    `--gpu`, which the launcher's command line must then say instead.
    """

    code = "AM108"
    name = "visible-devices-set-by-hand"
    message = "`{spelling}` chooses the GPUs inside the script: {why}; drop it and choose the GPUs where the run is launched (`CUDA_VISIBLE_DEVICES=... accel-launch ...`)"
    examples = (
        Example(
            before=(
                "import os\nimport torch\n\nos.environ[\"CUDA_VISIBLE_DEVICES\"] = \"0\"\n"
                "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            ),
            at=("4:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        for assign in analysis.nodes("Assign"):
            for target in assign.targets:  # type: ignore[attr-defined]
                if self._environ_entry(target.target):
                    self.report(assign, spelling=f'os.environ["{_VARIABLE}"] = ...', why=self._why(assign))
        for call in analysis.nodes("Call"):
            name = analysis.imports.qualify(call.func) or ""  # type: ignore[attr-defined]
            if name in ("os.environ.setdefault", "os.putenv") and self._names_variable(call.args[:1]):  # type: ignore[attr-defined]
                self.report(call, spelling=f"{name}(\"{_VARIABLE}\", ...)", why=self._why(call))

    def _why(self, node: cst.CSTNode) -> str:
        """Before the Accelerator exists, the line decides what every process sees; after it,
        CUDA has started and the line does nothing (DeepLabV3Plus's `--gpu_id`, read once the
        migrated `main()` has made its Accelerator)."""
        if self.analysis.accelerator_at(node) is None:
            return (
                "run before CUDA starts, it gives every launched process the same ones, numbered from 0, while each "
                "takes the device of its local rank (run after, it picks nothing)"
            )
        return "it runs after the Accelerator has started CUDA on its device, so it no longer picks anything (a GPU asked for with it is silently not used)"

    def _environ_entry(self, target: cst.BaseExpression) -> bool:
        if not isinstance(target, cst.Subscript) or self.analysis.imports.qualify(target.value) != "os.environ":
            return False
        return len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index) and self._is_variable(target.slice[0].slice.value)

    def _names_variable(self, args) -> bool:
        return bool(args) and self._is_variable(args[0].value)

    @staticmethod
    def _is_variable(value: cst.BaseExpression) -> bool:
        return isinstance(value, cst.SimpleString) and value.evaluated_value == _VARIABLE
