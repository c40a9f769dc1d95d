"""AM304: `zero_grad()` inside `accelerator.accumulate()` where it clears accumulated gradients."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.analysis.branches import accelerator_method, accumulate_withs
from migrator.rule import Example, Rule


class AccumulatedGradientsCleared(Rule):
    """## What it does
    Inside `with accelerator.accumulate(model):`, reports
    `optimizer.zero_grad()` called before the backward pass, and `model.zero_grad()`
    called anywhere.

    ## Why is this bad?
    A prepared optimizer's `zero_grad()` does nothing on the micro steps that only
    accumulate, and clears the gradients on the step that synchronises. Called before
    `backward`, it therefore throws away every earlier micro step's gradients exactly when
    they are about to be applied: only the last micro batch trains, and the learning rate
    acts on a batch `gradient_accumulation_steps` times smaller than intended. A model's
    own `zero_grad()` is not prepared at all and clears the gradients on every micro step,
    so nothing accumulates. Either way training runs without an error and converges worse.

    ## Example
    ```python
    with accelerator.accumulate(model):
        optimizer.zero_grad()
        accelerator.backward(model(batch).loss)
        optimizer.step()
    ```

    Use instead:
    ```python
    with accelerator.accumulate(model):
        accelerator.backward(model(batch).loss)
        optimizer.step()
        optimizer.zero_grad()
    ```

    ## See also
    - huggingface/accelerate#616: the gradient accumulation guide had `zero_grad()` at the
      wrong step (https://github.com/huggingface/accelerate/issues/616)
    - huggingface/accelerate#2341: worse results with Accelerate, caused by
      `model.zero_grad()` inside the accumulation step
    """

    code = "AM304"
    name = "accumulated-gradients-cleared"
    message = "`{call}` inside accumulate() clears the accumulated gradients: {why}"
    examples = (
        Example(
            before=(
                "from runtime import Accelerator\n\naccelerator = Accelerator()\n\n"
                "def step(model, optimizer, x):\n"
                "    with accelerator.accumulate(model):\n"
                "        optimizer.zero_grad()\n"
                "        accelerator.backward(model(x).sum())\n"
                "        optimizer.step()\n"
            ),
            at=("7:9",),
        ),
    )

    def visit_Module(self, module: cst.Module) -> None:
        for node in accumulate_withs(self.analysis):
            self._check_with(node)

    def _check_with(self, node: cst.With) -> None:
        analysis = self.analysis
        calls = [c for c in _calls_in(node.body) if isinstance(c.func, cst.Attribute)]
        backwards = [i for i, c in enumerate(calls) if c.func.attr.value == "backward"]  # type: ignore[union-attr]
        first_backward = backwards[0] if backwards else None
        for i, call in enumerate(calls):
            func = call.func
            if func.attr.value != "zero_grad":  # type: ignore[union-attr]
                continue
            owner = dotted_name(func.value)  # type: ignore[union-attr]
            role = analysis.roles.of(owner)
            shown = f"{owner}.zero_grad()"
            if role is Role.MODEL or (role is None and (owner or "").endswith(("model", "net"))):
                why = "a model's zero_grad() runs on every micro step, so nothing accumulates"
                self.report(call, call=shown, why=why)
            elif first_backward is not None and i < first_backward:
                why = "before backward it drops the earlier micro steps on the step that applies them; call it after step()"
                self.report(call, call=shown, why=why)


def _calls_in(node: cst.CSTNode) -> list[cst.Call]:
    """Calls under `node`, in source order."""
    calls: list[cst.Call] = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            calls.append(call)

    node.visit(_Find())
    return calls
