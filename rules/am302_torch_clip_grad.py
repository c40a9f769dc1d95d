"""AM302: `torch.nn.utils.clip_grad_norm_/value_` instead of the Accelerator's."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.precision import left_by_hand
from migrator.analysis.reach import unreachable_note
from migrator.edits import ImportChange, replace
from migrator.rule import Example, FixAvailability, Rule

_CLIPS = {
    "torch.nn.utils.clip_grad_norm_": "clip_grad_norm_",
    "torch.nn.utils.clip_grad_norm": "clip_grad_norm_",
    "torch.nn.utils.clip_grad.clip_grad_norm_": "clip_grad_norm_",
    "torch.nn.utils.clip_grad.clip_grad_norm": "clip_grad_norm_",
    "torch.nn.utils.clip_grad_value_": "clip_grad_value_",
    "torch.nn.utils.clip_grad.clip_grad_value_": "clip_grad_value_",
}


_HAND_SCALER = (
    " (left as written: the hand GradScaler stays (AM404 says why) and unscales these "
    "gradients itself; the Accelerator's clip would unscale them again under fp16)"
)


def _after_hand_unscale(analysis, call: cst.Call) -> bool:
    """A kept GradScaler's `unscale_()` comes before this clip in the same function."""
    patterns = analysis.patterns
    if patterns is None or not patterns.precision.scalers or not left_by_hand(analysis):
        return False
    function = analysis.branches.function_of(call)
    order = analysis.facts.order
    for scaler in patterns.precision.scalers:
        for use in scaler.uses:
            if (
                use.kind == "unscale_" and use.call is not None
                and analysis.branches.function_of(use.call) is function
                and order.get(use.call, 0) < order.get(call, 0)
            ):
                return True
    return False


class TorchClipGrad(Rule):
    """## What it does
    Rewrites `torch.nn.utils.clip_grad_norm_(...)` and `clip_grad_value_(...)` — under
    any import spelling (`nn.utils.clip_grad_norm_`, `from torch.nn.utils import
    clip_grad_norm_`, aliases, the deprecated `clip_grad_norm`) — to
    `accelerator.clip_grad_norm_(...)` / `accelerator.clip_grad_value_(...)`, and drops
    imports left unused. Names are resolved through the file's imports, never by text.

    ## Why is this bad?
    Under fp16 the gradients are scaled: clipping them before they are unscaled clips
    at the wrong norm. The Accelerator unscales first, and skips clipping on
    accumulation micro-steps.

    ## Example
    ```python
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    ```

    Use instead:
    ```python
    accelerator.clip_grad_norm_(model.parameters(), 1.0)
    ```

    ## Known limits
    A clip after the `unscale_()` of a GradScaler the migration leaves by hand (AM404) stays
    torch's: that scaler unscales the gradients itself.
    Where no Accelerator can reach the code (a function also called from module level,
    a method of a class that does not hold one), the clipping call is left as it is and
    reported; AM002 says why.
    """

    code = "AM302"
    name = "torch-clip-grad"
    message = "`{func}` clips without the Accelerator{note}"
    fix_title = "Use `accelerator.{method}`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom torch.nn.utils import clip_grad_norm_ as clip\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nmodel = torch.nn.Linear(2, 2)\nclip(model.parameters(), 1.0)\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nmodel = torch.nn.Linear(2, 2)\naccelerator.clip_grad_norm_(model.parameters(), 1.0)\n"
            ),
            at=("7:1",),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        analysis = self.analysis
        if not analysis.migrating:
            return
        qualified = analysis.imports.qualify(node.func)
        method = _CLIPS.get(qualified or "")
        if method is None:
            return
        reach = analysis.accelerator_at(node)  # `accelerator`, `self.accelerator`, or out of reach
        if reach is not None and _after_hand_unscale(analysis, node):
            self.report(node, func=cst.Module([]).code_for_node(node.func), note=_HAND_SCALER)
            return
        if reach is None:
            note = unreachable_note(analysis, node)
            self.report(node, func=cst.Module([]).code_for_node(node.func), note=note)
            return
        new_func = cst.parse_expression(f"{reach}.{method}")
        removals = []
        if isinstance(node.func, cst.Name):
            module, _, name = qualified.rpartition(".")
            alias = node.func.value if node.func.value != name else None
            removals.append(ImportChange(module, name, alias))
        self.report(
            node,
            edits=[replace(node.func, new_func)],
            remove_imports=removals,
            func=cst.Module([]).code_for_node(node.func),
            note="",
        )
