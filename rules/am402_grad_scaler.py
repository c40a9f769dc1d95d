"""AM402: a `GradScaler` driven by hand."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.options import option_status, with_option
from migrator.analysis.precision import left_by_hand
from migrator.analysis.precision import Scaler
from migrator.analysis.removal import import_removals, removal_unit
from migrator.cst import attr_call, with_clean_commas
from migrator.edits import Edit, Fix, remove, replace
from migrator.rule import Example, FixAvailability, Rule


class GradScaler(Rule):
    """## What it does
    Hands loss scaling to the Accelerator: `scaler.scale(loss).backward()` becomes
    `accelerator.backward(loss)`, `scaler.step(optimizer)` becomes `optimizer.step()`,
    `scaler.update()` and `scaler.unscale_(optimizer)` go, and so does
    `scaler = torch.cuda.amp.GradScaler()` once nothing else uses it. Without an autocast
    region the Accelerator gets `mixed_precision="fp16"` (with `enabled=flag`,
    `"fp16" if flag else "no"`).

    ## Why is this bad?
    Under `mixed_precision="fp16"` the Accelerator owns a scaler: `accelerator.backward`
    scales, the prepared optimizer unscales, skips steps with inf/NaN gradients and
    updates the scale, and `accelerator.clip_grad_norm_` unscales before clipping. A
    second, hand-driven scaler scales the loss twice.

    ## Example
    ```python
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    ```

    Use instead:
    ```python
    accelerator.backward(loss)
    accelerator.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    ```

    ## Known limits
    A scaler whose state goes into checkpoints keeps its definition (its state is now
    that of an unused scaler) and AM403 reports the place; a scaler whose `scale()` is
    used other than with `.backward()` is left as it is and reported by AM404.
    """

    code = "AM402"
    name = "grad-scaler"
    message = "`{use}` scales the loss by hand; the Accelerator scales it under mixed precision"
    fix_title = "Let the Accelerator scale the loss"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\n\nmodel = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "scaler = torch.cuda.amp.GradScaler()\nloss = model(torch.zeros(1, 2)).sum()\n"
                "scaler.scale(loss).backward()\nscaler.step(opt)\nscaler.update()\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator(mixed_precision=\"fp16\")\n\n"
                "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, opt = accelerator.prepare(model, opt)\nloss = model(torch.zeros(1, 2)).sum()\n"
                "accelerator.backward(loss)\nopt.step()\n"
            ),
            at=("5:1", "7:1", "8:1", "9:1"),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        patterns = analysis.patterns
        if patterns is None or not analysis.migrating:
            return
        precision = patterns.precision
        if not precision.scalers:
            return
        call, option, _ = option_status(analysis, "mixed_precision")
        blocked = left_by_hand(analysis)
        for scaler in precision.scalers:
            uses = [u for u in scaler.uses if u.kind in _TAKEN_OVER and u.call is not None]
            if not uses:
                continue
            edits = None if blocked else self._edits(scaler)
            if not edits:
                continue  # AM404 reports why
            fix = None
            if edits:
                if call is not None and option is not None:
                    edits.append(replace(call, with_option(call, option)))
                value = scaler.binding.value
                removals = []
                if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                    removals = import_removals(analysis.imports, value.func.value)
                fix = Fix(tuple(edits), remove_imports=tuple(removals))
            if not scaler.kept:
                self.report(scaler.binding.target, edits=fix, use=f"{scaler.name} = GradScaler()")
            for use in uses:
                self.report(use.call, edits=fix, use=f"{scaler.name}.{use.kind}()")

    def _edits(self, scaler: Scaler) -> list[Edit] | None:
        analysis = self.analysis
        edits: list[Edit] = []
        going: list[cst.CSTNode] = []
        for use in scaler.uses:
            call = use.call
            if use.kind not in _TAKEN_OVER or call is None:
                continue
            accelerator = analysis.accelerator_at(call)
            if use.kind == "scale":
                backward = _backward_of(analysis, call)
                if backward is None or accelerator is None or len(call.args) != 1:
                    return None
                args = [cst.Arg(call.args[0].value), *backward.args]
                args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in args]
                edits.append(replace(backward, attr_call(accelerator, "backward", with_clean_commas(args))))
            elif use.kind == "step":
                if not call.args or call.args[0].keyword is not None:
                    return None
                optimizer = call.args[0].value
                rest = with_clean_commas(call.args[1:])
                edits.append(replace(call, cst.Call(cst.Attribute(optimizer, cst.Name("step")), rest)))
            else:
                small = analysis.parent(call)
                if not isinstance(small, cst.Expr):
                    return None
                going.append(small)
        if not scaler.kept:
            small = analysis.statement_of(scaler.binding.target)
            if not isinstance(small, cst.Assign) or len(small.targets) != 1:
                return None
            going.append(small)
        lines = {id(analysis.parent(s)) for s in going}
        units = {}
        for small in going:
            unit = removal_unit(small, analysis.parent, analysis.imports, lambda s: id(s) in lines)
            units[id(unit)] = unit
        edits += [remove(u) for u in units.values()]
        return edits


_TAKEN_OVER = {"scale", "step", "update", "unscale_"}


def _backward_of(analysis, scale_call: cst.Call) -> cst.Call | None:
    """`scaler.scale(loss).backward(...)`: the outer call, given the inner one."""
    attribute = analysis.parent(scale_call)
    if isinstance(attribute, cst.Attribute) and attribute.attr.value == "backward":
        outer = analysis.parent(attribute)
        if isinstance(outer, cst.Call) and outer.func is attribute:
            return outer
    return None
