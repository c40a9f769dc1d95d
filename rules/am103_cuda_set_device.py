"""AM103: `torch.cuda.set_device(local_rank)` picks the GPU by hand."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.handed_models import handed_model
from migrator.analysis.reach import RUN_CALLS_IT, run_by_other_files
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule


class CudaSetDevice(Rule):
    """## What it does
    Removes `torch.cuda.set_device(...)` (with the `if` around it when nothing else is
    left in it, e.g. `if args.distributed:`), and the `with torch.cuda.device(...):`
    around a block (the block stays, one level out).

    ## Why is this bad?
    The Accelerator chooses and sets this process's GPU from the launcher's `LOCAL_RANK`
    (`accelerator.device`). A hand-written `set_device` reads a rank the migrated script
    no longer computes, and on one process or on CPU it fails or picks the wrong device.

    ## Example
    ```python
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    ```

    Use instead:
    ```python
    # nothing: `accelerator.device` is this process's GPU
    ```

    ## Known limits
    A `set_device` whose result is used as a value (not a statement of its own) is
    reported, not removed. In a file with no Accelerator that builds a model and hands it
    to the training of another file that gets none either, or in code other files of the
    run call on every process in a file given no Accelerator, it is reported, not removed.
    """

    code = "AM103"
    name = "cuda-set-device"
    message = "`{call}` picks the GPU by hand; the Accelerator sets this process's device{note}"
    fix_title = "Remove `torch.cuda.set_device(...)`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\n\ntorch.cuda.set_device(0)\n"
                "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, opt = accelerator.prepare(model, opt)\n"
            ),
            at=("3:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None:
            return
        if not analysis.migrating:
            self._handed_on()
            return
        facts = analysis.patterns.distribution
        for call in facts.set_devices:
            fix = facts.removal(analysis.parent(call))  # type: ignore[arg-type]
            note = "" if fix is not None else " (left as written: its result is used; remove the call by hand)"
            self.report(call, edits=fix, note=note, call="torch.cuda.set_device")
        for block in analysis.facts.by_type.get("With", []):
            self._device_block(block)  # type: ignore[arg-type]

    def _handed_on(self) -> None:
        """A set-up with no Accelerator whose model another file's training gets, and gets
        no Accelerator either (cnn-text-classification's main.py, `set_device(args.device)`
        before `train.train(...)`): named, left as written; on one process it still picks
        the GPU the user asked for."""
        analysis, config = self.analysis, self.ctx.config
        handed = handed_model(analysis, config)
        for call in analysis.patterns.distribution.set_devices:
            function = analysis.branches.function_of(call)
            per_process = function is not None and "rank" in cst.Module([]).code_for_node(function).lower()
            if per_process:
                continue  # a distribution helper's `set_device(args.gpu)` from LOCAL_RANK: AM219 takes the helper's call
            if run_by_other_files(analysis, call, config.run_callers, config.project_unpassed):
                # CycleGAN's BaseOptions.parse(): `torch.cuda.set_device(opt.gpu_ids[0])` on every process
                note = f" ({RUN_CALLS_IT}, and this file gets no Accelerator: every process would use this one GPU; remove it)"
            elif handed is not None:
                note = (
                    f" (left as written: this file hands `{handed.binding.name}` to the training of `{handed.spelling}`, "
                    "which gets no Accelerator; with the one you create by hand, remove it, or every process uses this one GPU)"
                )
            else:
                continue
            self.report(call, note=note, call="torch.cuda.set_device")

    def _device_block(self, block: cst.With) -> None:
        """`with torch.cuda.device(args.gpu):` around code: the body stays, one level out."""
        calls = [
            i.item for i in block.items
            if isinstance(i.item, cst.Call) and self.analysis.imports.qualify(i.item.func) == "torch.cuda.device"
        ]
        if not calls:
            return
        call = calls[0]
        alone = len(block.items) == 1 and block.items[0].asname is None
        if not alone or not isinstance(block.body, cst.IndentedBlock) or block.asynchronous is not None:
            self.report(call, note=" (left as written: remove the `with` by hand, keeping its body)", call="torch.cuda.device")
            return
        body = list(block.body.body)
        body[0] = body[0].with_changes(leading_lines=[*block.leading_lines, *body[0].leading_lines])
        self.report(call, edits=[replace(block, cst.FlattenSentinel(body))], note=" (the `with` goes, its body stays)", call="torch.cuda.device")
