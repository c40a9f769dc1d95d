"""AM516: a 0-d loss gathered across processes, then read as one number."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.branches import accelerator_method
from migrator.analysis.losses import loss_modules, loss_reduction
from migrator.cst import attr_call
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule

_GATHERS = {"gather", "gather_for_metrics"}


class GatheredScalarLoss(Rule):
    """## What it does
    Finds `loss = accelerator.gather_for_metrics(loss)` (or `gather`) where `loss` is one
    number per batch (`criterion(out, y)`, `F.cross_entropy(...)`, `outputs.loss`) and the
    gathered value is then read as one number (`loss.item()`, `float(loss)`), and replaces
    the gather by `accelerator.reduce(loss, reduction="mean")` (`"sum"` for a summing loss).

    ## Why is this bad?
    Gathering a 0-d tensor from N processes gives a tensor of N values: `.item()` raises
    `RuntimeError: a Tensor with 2 elements cannot be converted to Scalar` on the first
    evaluation batch of a multi-process run, while the script works on one process.
    `reduce` averages (or sums) the N values into one, the same on every process.

    ## Example
    ```python
    loss = criterion(logits, target)
    loss = accelerator.gather_for_metrics(loss)
    total += loss.item()
    ```

    Use instead:
    ```python
    loss = criterion(logits, target)
    loss = accelerator.reduce(loss, reduction="mean")
    total += loss.item()
    ```

    ## Known limits
    `reduce` counts the samples the last batch repeats to even out the processes, which
    `gather_for_metrics` would drop; gather the per-sample values
    (`reduction="none"`) instead where that matters.
    """

    code = "AM516"
    name = "gathered-scalar-loss"
    message = "`{call}` gathers a 0-d loss into {n} values, so `{read}` fails on more than one process; reduce it instead"
    fix_title = "Use `accelerator.reduce(loss, reduction=...)`"
    fix = FixAvailability.ALWAYS
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "criterion = torch.nn.CrossEntropyLoss()\ntotal = 0.0\n"
                "def evaluate(out, y):\n    global total\n    loss = criterion(out, y)\n"
                "    loss = accelerator.gather_for_metrics(loss)\n    total += loss.item()\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "criterion = torch.nn.CrossEntropyLoss()\ntotal = 0.0\n"
                "def evaluate(out, y):\n    global total\n    loss = criterion(out, y)\n"
                '    loss = accelerator.reduce(loss, reduction="mean")\n    total += loss.item()\n'
            ),
            at=("10:12",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.has_accelerator:
            return
        criteria = loss_modules(analysis.facts)
        for b in analysis.facts.bindings:
            call = b.value
            if not isinstance(call, cst.Call) or len(call.args) != 1 or call.args[0].keyword is not None:
                continue
            if accelerator_method(call, analysis.accelerator_names) not in _GATHERS:
                continue
            reduction = self._reduction(call.args[0].value, b, criteria)
            read = self._read_as_number(b) if reduction is not None else None
            if read is None:
                continue
            receiver = cst.Module([]).code_for_node(call.func.value)  # type: ignore[attr-defined]
            args = [call.args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                    cst.Arg(cst.SimpleString(f'"{reduction}"'), keyword=cst.Name("reduction"),
                            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))]
            shown = cst.Module([]).code_for_node(call)
            self.report(call, edits=[replace(call, attr_call(receiver, "reduce", args))],
                        call=shown if len(shown) < 60 else "gather_for_metrics(...)", n="N", read=read)

    def _reduction(self, value: cst.BaseExpression, binding, criteria: dict[str, str]) -> str | None:
        """The loss's reduction when `value` is a 0-d loss: computed right there, or a
        name last bound to one before the gather in the same scope."""
        direct = loss_reduction(value, criteria)
        if direct is not None or not isinstance(value, cst.Name):
            return direct
        analysis = self.analysis
        at = analysis.order(binding.statement)
        earlier = [
            b for b in analysis.facts.bindings
            if b.name == value.value and b.scope is binding.scope and analysis.order(b.statement) < at and b.value is not None
        ]
        if not earlier:
            return None
        last = max(earlier, key=lambda b: analysis.order(b.statement))
        return loss_reduction(last.element if last.element is not None else last.value, criteria)

    def _read_as_number(self, binding) -> str | None:
        """`loss.item()` or `float(loss)` after the gather, in the same scope."""
        analysis = self.analysis
        at = analysis.order(binding.statement)
        for c in analysis.facts.calls:
            if c.scope is not binding.scope or analysis.order(c.node) < at:
                continue
            func = c.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "item" and dotted_name(func.value) == binding.name:
                return f"{binding.name}.item()"
            if dotted_name(func) == "float" and c.node.args and dotted_name(c.node.args[0].value) == binding.name:
                return f"float({binding.name})"
        return None
