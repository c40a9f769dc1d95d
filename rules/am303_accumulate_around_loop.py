"""AM303: `with accelerator.accumulate(model):` around the training loop instead of inside it."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.branches import accelerator_method, accumulate_withs
from migrator.rule import Example, Rule


class AccumulateAroundLoop(Rule):
    """## What it does
    Reports `with accelerator.accumulate(model):` whose body holds the loop over batches
    (a `for`/`while` loop that calls `backward`), instead of being entered once per batch
    inside that loop.

    ## Why is this bad?
    `accumulate()` decides, when it is entered, whether this micro step synchronises the
    gradients and lets the optimizer step. Entered once around the whole loop, it decides
    once: every batch of the epoch then steps the optimizer (no accumulation at all), or
    none does until the end. The script trains, just not with the effective batch size
    it asks for — models converge worse and nobody sees why.

    ## Example
    ```python
    with accelerator.accumulate(model):
        for batch in loader:
            accelerator.backward(model(batch).loss)
            optimizer.step()
            optimizer.zero_grad()
    ```

    Use instead:
    ```python
    for batch in loader:
        with accelerator.accumulate(model):
            accelerator.backward(model(batch).loss)
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## See also
    - huggingface/accelerate#1211: the `accumulate` docs had the context manager and the
      loop in the wrong order ("I was wondering why my model wasn't converging well!")
      (https://github.com/huggingface/accelerate/pull/1211)
    - huggingface/accelerate#1817: "the context manager needs to be 1:1 with the forward
      and backward pass"
    """

    code = "AM303"
    name = "accumulate-around-loop"
    message = "`{call}` is entered once around the loop on line {line}: it must be entered once per batch"
    examples = (
        Example(
            before=(
                "from runtime import Accelerator\n\naccelerator = Accelerator()\n\n"
                "def train(model, loader, optimizer):\n"
                "    with accelerator.accumulate(model):\n"
                "        for x in loader:\n"
                "            accelerator.backward(model(x).sum())\n"
                "            optimizer.step()\n"
            ),
            at=("6:10",),
        ),
    )

    def visit_Module(self, module: cst.Module) -> None:
        for node in accumulate_withs(self.analysis):
            self._check_with(node)

    def _check_with(self, node: cst.With) -> None:
        analysis = self.analysis
        item = next((i for i in node.items if accelerator_method(i.item, analysis.accelerator_names) == "accumulate"), None)
        if item is None:
            return
        for fact in analysis.facts.calls:
            func = fact.node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "backward"):
                continue
            for loop in fact.loops:
                if self._inside(loop, node):
                    self.report(item.item, call=_text(item.item), line=analysis.position(loop).start.line)
                    return

    def _inside(self, inner: cst.CSTNode, outer: cst.CSTNode) -> bool:
        current = self.analysis.parent(inner)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
            if current is outer:
                return True
            current = self.analysis.parent(current)
        return False


def _text(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)
