"""AM401: `torch.autocast(...)` / `torch.cuda.amp.autocast()` regions by hand."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.options import option_status, with_option
from migrator.analysis.removal import import_removals
from migrator.cst import attr_call
from migrator.edits import Edit, Fix, ImportChange, replace
from migrator.rule import Example, FixAvailability, Rule


class TorchAutocast(Rule):
    """## What it does
    Rewrites `with torch.cuda.amp.autocast():`, `with torch.autocast("cuda",
    dtype=torch.bfloat16):` and `with torch.amp.autocast(...)` (any import spelling) to
    `with accelerator.autocast():`, and gives the Accelerator the precision they asked for:
    `Accelerator(mixed_precision="fp16")` or `"bf16"`, read from the `dtype` (fp16 by default
    on CUDA, bf16 on CPU); `enabled=args.amp` becomes
    `mixed_precision="fp16" if args.amp else "no"`. `autocast(enabled=False)` (a region
    kept in full precision inside an autocast one) stays as it is.

    ## Why is this bad?
    With the precision set on the Accelerator, prepared models run their forward pass
    under autocast, `accelerator.backward` scales fp16 losses, and `clip_grad_norm_`
    unscales first; a hand-made autocast region knows none of that, and its device type
    (`"cuda"`) is wrong on a CPU process.

    ## Example
    ```python
    with torch.cuda.amp.autocast():
        loss = criterion(model(x), y)
    ```

    Use instead:
    ```python
    accelerator = Accelerator(mixed_precision="fp16")
    ...
    with accelerator.autocast():
        loss = criterion(model(x), y)
    ```

    ## Known limits
    Regions that ask for different precisions, a dtype the migrator cannot read, and
    autocast used through a variable (`partial(torch.autocast, ...)`) are left as they
    are and reported by AM404.
    """

    code = "AM401"
    name = "torch-autocast"
    message = "`{call}` sets mixed precision by hand; use `accelerator.autocast()` and `mixed_precision`"
    fix_title = "Use `with accelerator.autocast():` and Accelerator(mixed_precision=...)"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\n\nmodel = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "with torch.autocast(\"cuda\", dtype=torch.bfloat16):\n    y = model(torch.zeros(1, 2))\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator(mixed_precision=\"bf16\")\n\n"
                "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, opt = accelerator.prepare(model, opt)\n"
                "with accelerator.autocast():\n    y = model(torch.zeros(1, 2))\n"
            ),
            at=("5:6",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        patterns = analysis.patterns
        if patterns is None or not analysis.migrating:
            return
        precision = patterns.precision
        regions = [a for a in precision.autocasts if not a.disabled]
        if not regions:
            return
        call, option, problem = option_status(analysis, "mixed_precision")
        blocked = problem is not None or precision.conflict is not None or bool(precision.indirect)
        edits: list[Edit] = []
        for region in regions:
            accelerator = analysis.accelerator_at(region.call)
            if accelerator is None or region.reason is not None:
                blocked = True
                continue
            edits.append(replace(region.call, attr_call(accelerator, "autocast")))
        if call is not None and option is not None:
            edits.append(replace(call, with_option(call, option)))
        if blocked:
            return  # AM404 reports why
        fix = Fix(tuple(edits), remove_imports=tuple(self._imports(regions)))
        for region in regions:
            self.report(region.call, edits=fix, call=cst.Module([]).code_for_node(region.call.func) + "(...)")

    def _imports(self, regions) -> list[ImportChange]:
        out: list[ImportChange] = []
        for region in regions:
            func = region.call.func
            head = func.value if isinstance(func, cst.Name) else None
            if head is not None:
                out += import_removals(self.analysis.imports, head)
        return out
