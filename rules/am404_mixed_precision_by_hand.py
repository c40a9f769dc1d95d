"""AM404: hand-written mixed precision the migrator leaves as it is."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.options import option_status
from migrator.rule import Example, Rule


# The option alone beside the hand-made scaler would scale the loss twice.
_THEN = (
    ", then migrate again so the GradScaler and autocast become the Accelerator's "
    "(the option beside a hand-made scaler scales the loss twice)"
)


class MixedPrecisionByHand(Rule):
    """## What it does
    Reports autocast regions and GradScalers that AM401/AM402 do not rewrite, with the
    reason: regions asking for different precisions (one Accelerator has one
    `mixed_precision`), a dtype that is not a literal torch dtype, autocast used through a
    variable (`amp_autocast = partial(torch.autocast, ...)`, timm's style), a flag the
    Accelerator's creation cannot see, or a scaler whose `scale()` result is kept.

    ## Why is this bad?
    Until it is migrated, this code mixes a hand-made autocast or scaler with the
    Accelerator's: losses scaled twice, or not at all under fp16.

    ## What to do by hand
    Choose one precision and pass it to the Accelerator
    (`Accelerator(mixed_precision="bf16")`), replace the regions with
    `with accelerator.autocast():` (or drop them: prepared models already run their
    forward pass under autocast), call `accelerator.backward(loss)` and
    `optimizer.step()` instead of the scaler.

    ## Example
    ```python
    amp_autocast = partial(torch.autocast, device_type="cuda", dtype=torch.float16)
    with amp_autocast():
        loss = model(x)
    ```

    Use instead:
    ```python
    accelerator = Accelerator(mixed_precision="fp16")
    with accelerator.autocast():
        loss = model(x)
    ```
    """

    code = "AM404"
    name = "mixed-precision-by-hand"
    message = "Mixed precision left as written: {reason}"
    examples = (
        Example(
            before=(
                "import torch\nfrom functools import partial\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "amp = partial(torch.autocast, device_type=\"cuda\")\n"
            ),
            at=("6:15",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        patterns = analysis.patterns
        if patterns is None or not analysis.migrating:
            return
        precision = patterns.precision
        for place in precision.indirect:
            self.report(place, reason="autocast is used through a variable, so its regions cannot be found")
        regions = [a for a in precision.autocasts if not a.disabled]
        blocked = None
        if precision.indirect:
            blocked = "autocast is used through a variable, so its regions cannot be found"
        elif precision.conflict is not None:
            blocked = precision.conflict
        elif regions or precision.scalers:
            _, option, problem = option_status(analysis, "mixed_precision")
            if option is not None and problem is not None:
                blocked = problem + _THEN
        for region in regions:
            if region.reason is not None:
                self.report(region.call, reason=region.reason)
            elif analysis.accelerator_at(region.call) is None:
                self.report(region.call, reason="the Accelerator cannot be reached from this code")
            elif blocked is not None and not precision.indirect:
                self.report(region.call, reason=blocked)
        for scaler in precision.scalers:
            scaling = [u for u in scaler.uses if u.kind == "scale"]
            odd = [u for u in scaling if not _is_backward_receiver(analysis, u.call)]
            for use in odd:
                self.report(use.call, reason=f"`{scaler.name}.scale(...)` is used other than as `.backward()`")
            if scaling and not odd and blocked is not None:
                self.report(scaler.binding.target, reason=f"`{scaler.name}` stays with the autocast regions: {blocked}")


def _is_backward_receiver(analysis, call: cst.Call | None) -> bool:
    attribute = analysis.parent(call) if call is not None else None
    return isinstance(attribute, cst.Attribute) and attribute.attr.value == "backward"
