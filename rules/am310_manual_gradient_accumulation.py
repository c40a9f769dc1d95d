"""AM310: gradient accumulation written by hand."""

from __future__ import annotations

from typing import Callable, Sequence

import libcst as cst

from migrator.analysis import Role
from migrator.analysis.accumulation import Accumulation
from migrator.analysis.options import option_status, with_option
from migrator.edits import Edit, replace
from migrator.rule import Example, FixAvailability, Rule

_CLEANUP_METHODS = {"step", "zero_grad", "unscale_", "update"}


class ManualGradientAccumulation(Rule):
    """## What it does
    Rewrites the hand-written accumulation loop

    - the loss divided by N (`loss = loss / accum_steps`, `loss /= N`,
      `(loss / N).backward()`),
    - the optimizer stepped under `if (i + 1) % N == 0:` (or `i % N == 0 or i ==
      len(loader) - 1`), `i` being the loop's enumerate() index,

    into `Accelerator(gradient_accumulation_steps=N)` with the loop body inside
    `with accelerator.accumulate(model):`. The division goes (accelerator.backward
    divides); the step condition becomes `if accelerator.sync_gradients:`, or goes when it
    held only the optimizer's `step()`/`zero_grad()` (the prepared optimizer skips them on
    micro steps).

    ## Why is this bad?
    On N processes every backward all-reduces the gradients, micro steps included: the
    hand-written loop pays N times the communication, and the last, incomplete group of an
    epoch is stepped or carried over by accident. `accumulate()` skips the all-reduce on
    micro steps (`no_sync`) and always steps at the end of the dataloader.

    ## Example
    ```python
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```

    Use instead:
    ```python
    accelerator = Accelerator(gradient_accumulation_steps=accum_steps)
    ...
    for i, (x, y) in enumerate(loader):
        with accelerator.accumulate(model):
            loss = criterion(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## Known limits
    The loss printed after the rewrite is the undivided one (N times what the script
    used to print). Loops with another shape are reported by AM311 and left as they are.
    """

    code = "AM310"
    name = "manual-gradient-accumulation"
    message = "Gradients accumulated by hand every `{steps}` batches; use accelerator.accumulate()"
    fix_title = "Wrap the step in `with accelerator.accumulate(model):`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\n\naccum = 4\nmodel = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "loader = torch.utils.data.DataLoader(torch.zeros(8, 2))\n"
                "for i, x in enumerate(loader):\n    loss = model(x).sum() / accum\n    loss.backward()\n"
                "    if (i + 1) % accum == 0:\n        opt.step()\n        opt.zero_grad()\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccum = 4\n\n"
                "accelerator = Accelerator(gradient_accumulation_steps=accum)\n"
                "model = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "loader = torch.utils.data.DataLoader(torch.zeros(8, 2))\n"
                "model, opt, loader = accelerator.prepare(model, opt, loader)\n"
                "for i, x in enumerate(loader):\n    with accelerator.accumulate(model):\n"
                "        loss = model(x).sum()\n        accelerator.backward(loss)\n"
                "        opt.step()\n        opt.zero_grad()\n"
            ),
            at=("10:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        patterns = analysis.patterns
        if patterns is None or not analysis.migrating:
            return
        call, option, problem = option_status(analysis, "gradient_accumulation_steps")
        for acc in patterns.accumulations:
            if not acc.migratable:
                continue
            accelerator = analysis.accelerator_at(acc.loop)
            if problem is not None or accelerator is None:
                continue  # AM311 reports it, with the reason
            edits: list[Edit] = [replace(acc.loop.body, self._body(acc, accelerator))]
            if call is not None and option is not None:
                edits.append(replace(call, with_option(call, option)))
            self.report(acc.anchor, edits=edits, steps=acc.steps)

    def _body(self, acc: Accumulation, accelerator: str) -> cst.IndentedBlock:
        rewrite = _Rewrite(acc, accelerator, self._skips_micro_steps)
        body = acc.loop.body
        assert isinstance(body, cst.IndentedBlock)
        inner = body.visit(rewrite)
        assert isinstance(inner, cst.IndentedBlock)
        models = ", ".join(acc.models)
        with_statement = cst.With(
            items=[cst.WithItem(cst.parse_expression(f"{accelerator}.accumulate({models})"))],
            body=inner.with_changes(header=cst.TrailingWhitespace()),
            leading_lines=inner.body[0].leading_lines if inner.body else (),
        )
        if inner.body:
            first = inner.body[0].with_changes(leading_lines=[])
            with_statement = with_statement.with_changes(body=with_statement.body.with_changes(body=[first, *inner.body[1:]]))
        return body.with_changes(body=[with_statement])


    def _skips_micro_steps(self, owner: str) -> bool:
        role = self.analysis.roles.of(owner)
        if role is Role.OPTIMIZER or owner.endswith("scaler"):
            return True
        return role is Role.SCHEDULER and owner in self.analysis.prepared


class _Rewrite(cst.CSTTransformer):
    """Drops the divisions and turns the step condition into `sync_gradients`."""

    def __init__(self, acc: Accumulation, accelerator: str, skips: Callable[[str], bool]) -> None:
        super().__init__()
        self.skips = skips
        self.acc = acc
        self.accelerator = accelerator
        self.drop = {id(d.node) for d in acc.divisions if d.kind == "drop"}
        self.left = {id(d.node) for d in acc.divisions if d.kind == "left"}

    def on_leave(self, original, updated):  # type: ignore[override]
        if id(original) in self.drop:
            return cst.RemovalSentinel.REMOVE
        if id(original) in self.left and isinstance(updated, cst.BinaryOperation):
            return updated.left.with_changes(lpar=[], rpar=[]) if _simple(updated.left) else updated.left
        if original is self.acc.step_if:
            return self._step(updated)
        return super().on_leave(original, updated)

    def leave_SimpleStatementLine(self, original, updated):
        return cst.RemovalSentinel.REMOVE if not updated.body else updated

    def _step(self, updated: cst.If):
        statements: Sequence[cst.BaseStatement] = updated.body.body  # type: ignore[attr-defined]
        if all(_is_optimizer_cleanup(s, self.skips) for s in statements):
            first = statements[0].with_changes(leading_lines=[*updated.leading_lines, *statements[0].leading_lines])
            return cst.FlattenSentinel([first, *statements[1:]])
        return updated.with_changes(test=cst.parse_expression(f"{self.accelerator}.sync_gradients"))


def _simple(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))


def _is_optimizer_cleanup(statement: cst.BaseStatement, skips: Callable[[str], bool]) -> bool:
    """`optimizer.step()`, `optimizer.zero_grad()`, `scaler.step(optimizer)`,
    `scheduler.step()` of a prepared scheduler: what prepared objects already skip on
    micro steps."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
            return False
        func = small.value.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in _CLEANUP_METHODS):
            return False
        if not skips(cst.Module([]).code_for_node(func.value)):
            return False
    return True
