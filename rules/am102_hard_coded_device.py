"""AM102: a device variable chosen by hand (`torch.device("cuda" if ... else "cpu")`)."""

from __future__ import annotations

import libcst as cst

from migrator.cst import removal_node
from migrator.edits import remove, replace
from migrator.rule import Example, FixAvailability, Rule


class HardCodedDevice(Rule):
    """## What it does
    Finds `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` and its
    variants (plain strings, `"cuda:0"`, `args.device`, a `use_cuda` flag). While the
    name is still used once device moves are gone (`torch.zeros(n, device=device)`, or
    passed to a function that takes `device`), it becomes `device = accelerator.device`;
    when nothing uses it any more, the assignment goes.

    ## Why is this bad?
    On N processes every process must use its own device; a hand-picked `"cuda"` puts
    all of them on GPU 0.

    ## Example
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    noise = torch.randn(8, 100, device=device)
    ```

    Use instead:
    ```python
    device = accelerator.device
    noise = torch.randn(8, 100, device=device)
    ```

    ## Known limits
    In code that already has an Accelerator, a device variable assigned before the
    Accelerator exists is reported, not rewritten.
    """

    code = "AM102"
    name = "hard-coded-device"
    message = "`{name}` is chosen by hand; use the Accelerator's device"
    fix_title = "Use `accelerator.device` (or drop the unused variable)"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "device = torch.device(\"cuda\")\nx = torch.zeros(2, device=device)\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "device = accelerator.device\nx = torch.zeros(2, device=device)\n"
            ),
            at=("5:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.migrating:
            return
        for var in analysis.device_variables:
            binding = var.binding
            small = analysis.statement_of(binding.target)
            if not isinstance(small, cst.Assign) or len(small.targets) != 1 or small.value is not binding.value:
                continue
            if cst.Module([]).code_for_node(small.value).strip() == f"{analysis.accelerator}.device":
                continue  # `self.device = self.accelerator.device`: already the Accelerator's
            unused = "." not in var.name and not analysis.surviving_device_uses.get(var.name)
            if unused:
                line = analysis.parent(small)
                self.report(small, edits=[remove(removal_node(line, small))], name=var.name)
            elif self._defined_after_accelerator(small) and analysis.accelerator_at(small) is not None:
                new_value = cst.parse_expression(f"{analysis.accelerator_at(small)}.device")
                self.report(small, edits=[replace(small.value, new_value)], name=var.name)
            else:
                self.report(small, name=var.name)

    def _defined_after_accelerator(self, small: cst.Assign) -> bool:
        analysis = self.analysis
        if not analysis.has_accelerator:
            return True
        here = analysis.position(small).start.line
        firsts = [
            analysis.position(b.statement).start.line
            for b in analysis.facts.bindings
            if b.name in analysis.accelerator_names
        ]
        return bool(firsts) and min(firsts) < here
