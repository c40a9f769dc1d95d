"""AM305: several `accelerator.accumulate()` context managers for one step."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.branches import accelerator_method, accumulate_withs
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule, Safety


class SplitAccumulate(Rule):
    """## What it does
    Finds one step that enters `accumulate()` once per model —
    `with accelerator.accumulate(a), accelerator.accumulate(b):` — or joins them with
    `and` — `with accelerator.accumulate(a) and accelerator.accumulate(b):` — and turns
    them into one `accelerator.accumulate(a, b)`, which takes any number of models.

    ## Why is this bad?
    `a and b` is an expression: `with` enters only its value, the last context manager,
    so the other models are never put in `no_sync` and all-reduce their gradients on every
    micro step. Two separate `accumulate()` calls each count a micro step, so the
    optimizer steps twice as often as configured (every `k/2` batches). Neither raises.

    ## Example
    ```python
    with accelerator.accumulate(generator) and accelerator.accumulate(discriminator):
        ...
    ```

    Use instead:
    ```python
    with accelerator.accumulate(generator, discriminator):
        ...
    ```

    ## Fix safety
    The fix is unsafe: it changes how training runs (which is its point). After it, the
    models skip gradient synchronisation together and the optimizer steps on the
    configured schedule, so losses differ from the run before the fix.

    ## See also
    - hustvl/MobileI2V#14: `with accelerator.accumulate(model) and
      accelerator.accumulate(discriminator) and ...` enters only the last one
      (https://github.com/hustvl/MobileI2V/issues/14)
    - huggingface/accelerate#1708: `accumulate()` takes several models
    """

    code = "AM305"
    name = "split-accumulate"
    message = "`{shown}`: one step must enter one accumulate(); {why}"
    fix_title = "Use one `accelerator.accumulate(a, b)`"
    fix = FixAvailability.SOMETIMES
    safety = Safety.UNSAFE
    examples = (
        Example(
            before=(
                "from runtime import Accelerator\n\naccelerator = Accelerator()\n\n"
                "def step(gen, disc):\n"
                "    with accelerator.accumulate(gen) and accelerator.accumulate(disc):\n"
                "        pass\n"
            ),
            at=("6:10",),
        ),
    )

    def visit_Module(self, module: cst.Module) -> None:
        for node in accumulate_withs(self.analysis):
            self._check_with(node)

    def _check_with(self, node: cst.With) -> None:
        names = self.analysis.accelerator_names
        joined = [i for i in node.items if isinstance(i.item, cst.BooleanOperation) and len(_operands(i.item, names)) > 1]
        for item in joined:
            calls = _operands(item.item, names)
            why = "`and`/`or` enters only one of them"
            whole = _leaves(item.item) == len(calls)  # nothing but accumulate() calls joined
            self._report(item.item, calls, item.item, why, fixable=whole)
        separate = [i for i in node.items if accelerator_method(i.item, names) == "accumulate"]
        if len(separate) > 1:
            calls = [i.item for i in separate]
            why = f"each call counts a micro step, so the optimizer steps {len(calls)}× too often"
            self._report(node, calls, None, why)

    def _report(
        self, node: cst.CSTNode, calls: list[cst.Call], replaced: cst.CSTNode | None, why: str, fixable: bool = True
    ) -> None:
        shown = " ".join(cst.Module([]).code_for_node(node).split())
        if isinstance(node, cst.With):
            shown = "with " + ", ".join(cst.Module([]).code_for_node(i.item) for i in node.items)
        merged = _merged(calls) if fixable else None
        if merged is None:
            self.report(node, shown=shown, why=why)
            return
        if replaced is not None:
            self.report(node, edits=[replace(replaced, merged)], shown=shown, why=why)
            return
        assert isinstance(node, cst.With)
        ids = {id(c) for c in calls}
        items, placed = [], False
        for item in node.items:
            if id(item.item) in ids:
                if not placed:
                    items.append(item.with_changes(item=merged))
                    placed = True
                continue
            items.append(item)
        items[-1] = items[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        self.report(node, edits=[replace(node, node.with_changes(items=items))], shown=shown, why=why)


def _operands(expr: cst.BaseExpression, names: tuple[str, ...]) -> list[cst.Call]:
    """The accumulate() calls of `a.accumulate(x) and a.accumulate(y) and ...`."""
    if isinstance(expr, cst.BooleanOperation):
        return _operands(expr.left, names) + _operands(expr.right, names)
    return [expr] if accelerator_method(expr, names) == "accumulate" else []  # type: ignore[list-item]


def _leaves(expr: cst.BaseExpression) -> int:
    if isinstance(expr, cst.BooleanOperation):
        return _leaves(expr.left) + _leaves(expr.right)
    return 1


def _merged(calls: list[cst.Call]) -> cst.Call | None:
    """One `accelerator.accumulate(a, b)` when every call has the same receiver and only
    positional arguments."""
    receivers = {cst.Module([]).code_for_node(c.func.value) for c in calls}  # type: ignore[attr-defined]
    args = [a for c in calls for a in c.args]
    if len(receivers) != 1 or any(a.keyword is not None or a.star for a in args):
        return None
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    args = [a.with_changes(comma=comma) for a in args]
    args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return calls[0].with_changes(args=args)
