"""AM405: NVIDIA apex.amp mixed precision, made the Accelerator's."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.options import option_status, with_option
from migrator.analysis.removal import import_removals, is_pure_test, removal_unit
from migrator.cst import attr_call, with_clean_commas
from migrator.edits import Edit, Fix, remove, replace
from migrator.rule import Example, FixAvailability, Rule


class ApexAmp(Rule):
    """## What it does
    Moves NVIDIA apex's automatic mixed precision onto the Accelerator:
    `model, optimizer = amp.initialize(model, optimizer, opt_level="O1")` goes and the
    Accelerator gets `mixed_precision="fp16"` (O1 and O2; under `if args.fp16:` it is
    `"fp16" if args.fp16 else "no"`), and
    `with amp.scale_loss(loss, optimizer) as scaled_loss: scaled_loss.backward()` becomes
    `accelerator.backward(loss)`. The `from apex import amp` import goes with its last use.
    In a run of several files, each file converts its own part (the set-up its
    `initialize`, the engine its `scale_loss`).

    ## Why is this bad?
    `amp.initialize` has to see the model before any DDP wrap, so it cannot stay after
    prepare(), and apex is no longer maintained for current PyTorch. The Accelerator's fp16
    is what O1/O2 do: fp16 compute, fp32 weights, a dynamic loss scale applied by
    `accelerator.backward` and removed before clipping.

    ## Known limits
    Everything of apex.amp stays as written, and the file is refused (AM955), when one part
    cannot be converted: O3 (pure fp16) or an opt_level that cannot be read, a fixed
    `loss_scale` or other options of `initialize`, `amp.initialize` under a loop, `else` or
    `try`, `scale_loss` with `delay_unscale` or a body other than the backward,
    `amp.master_params(...)` other than clipped (in a torch clip of an optimizer this file's
    `amp.initialize` was given it becomes the model's `parameters()`, and AM302 makes the
    clip the Accelerator's) and `amp.state_dict()` in checkpoints. Each finding says which.
    An `opt_level` read from the script's own option (`args.fp16_opt_level`, declared with
    a default of O1 or O2 and no `choices`) is taken at its default: a command line asking
    for O3 gets the Accelerator's fp16 (fp32 weights), not pure fp16.

    ## Example
    ```python
    from apex import amp
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
    with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward()
    ```

    Use instead:
    ```python
    accelerator = Accelerator(mixed_precision="fp16")
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.backward(loss)
    ```
    """

    code = "AM405"
    name = "apex-amp"
    message = "`{call}` is NVIDIA apex.amp's mixed precision by hand; {outcome}"
    fix_title = "Use Accelerator(mixed_precision=...) and accelerator.backward(loss)"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom apex import amp\n\nmodel = torch.nn.Linear(2, 2).cuda()\n"
                "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, opt = amp.initialize(model, opt, opt_level=\"O1\")\n"
                "for x in torch.zeros(4, 1, 2):\n    loss = model(x.cuda()).sum()\n"
                "    with amp.scale_loss(loss, opt) as scaled_loss:\n        scaled_loss.backward()\n    opt.step()\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator(mixed_precision=\"fp16\")\n\n"
                "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, opt = accelerator.prepare(model, opt)\n"
                "for x in torch.zeros(4, 1, 2):\n    loss = model(x.to(accelerator.device)).sum()\n"
                "    accelerator.backward(loss)\n    opt.step()\n"
            ),
            at=("6:14", "9:10"),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        patterns = analysis.patterns
        if patterns is None or not analysis.migrating or patterns.precision.apex is None:
            return
        apex = patterns.precision.apex
        reason = self._blocked(apex)
        if reason is not None:
            for place, why in apex.blockers or [(i.call, reason) for i in apex.initializes] + [
                (b.statement.items[0].item, reason) for b in apex.backwards
            ]:
                self.report(place, call=_shown(place), outcome=f"all of it is left as written: {why}")
            return
        edits: list[Edit] = []
        going = {id(i.statement) for i in apex.initializes}

        def goes(statement: cst.CSTNode) -> bool:  # the `try: from apex import amp` beside it goes too
            return id(statement) in going or _guards_apex_import(statement)

        for init in apex.initializes:
            edits.append(remove(removal_unit(init.statement, analysis.parent, analysis.imports, goes)))
        for scaled in apex.backwards:
            accelerator = analysis.accelerator_at(scaled.statement)
            args = [cst.Arg(scaled.loss), *scaled.backward.args]
            args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in args]
            line = cst.SimpleStatementLine([cst.Expr(attr_call(accelerator, "backward", with_clean_commas(args)))])
            whole = scaled.branch if scaled.branch is not None and is_pure_test(scaled.branch.test, analysis.imports) else None
            old = whole if whole is not None else scaled.statement
            edits.append(replace(old, line.with_changes(leading_lines=old.leading_lines)))
        for master in apex.master_params:
            edits.append(replace(master.call, cst.parse_expression(f"{master.model}.parameters()")))
        if apex.initializes:
            call, option, _ = option_status(analysis, "mixed_precision")
            if call is not None and option is not None:
                edits.append(replace(call, with_option(call, option)))
        fix = Fix(tuple(edits), remove_imports=tuple(import_removals(analysis.imports, "amp")))
        for init in apex.initializes:
            outcome = "the Accelerator takes its precision"
            if init.option:
                outcome += (
                    f" (`{init.option}` is read at its default, O1 or O2: a command line asking for O0 or O3 now "
                    "gets the Accelerator's fp16 with fp32 weights as well)"
                )
            if init.level == "O2":
                outcome += (
                    " (O2 kept fp16 weights beside fp32 master copies; the Accelerator keeps fp32 weights and "
                    "computes in fp16 under autocast: close, not bit-equal)"
                )
            self.report(init.call, edits=fix, call="amp.initialize(...)", outcome=outcome)
        for scaled in apex.backwards:
            self.report(
                scaled.statement.items[0].item, edits=fix, call="amp.scale_loss(...)",
                outcome="`accelerator.backward` scales the loss",
            )
        for master in apex.master_params:
            self.report(
                master.call, edits=fix, call="amp.master_params(...)",
                outcome=f"the clip takes `{master.model}.parameters()` (the Accelerator unscales their gradients first)",
            )

    def _blocked(self, apex) -> str | None:
        """Why the file's apex.amp cannot become the Accelerator's, or None."""
        analysis = self.analysis
        if apex.blockers:
            return apex.blockers[0][1]
        if analysis.patterns.precision.conflict is not None:
            return analysis.patterns.precision.conflict
        if apex.initializes:
            _, _, problem = option_status(analysis, "mixed_precision")
            if problem is not None and apex.value is not None:
                return problem
        if any(analysis.accelerator_at(b.statement) is None for b in apex.backwards):
            return "the Accelerator cannot be reached from its `scale_loss`"
        return None


def _guards_apex_import(statement: cst.CSTNode) -> bool:
    """`try: from apex import amp` / `except ImportError: ...` (the import pass drops it
    with the import; the `if args.fp16:` around both goes whole)."""
    if not isinstance(statement, cst.Try) or not isinstance(statement.body, cst.IndentedBlock):
        return False
    lines = statement.body.body
    smalls = [s for line in lines if isinstance(line, cst.SimpleStatementLine) for s in line.body]
    return bool(smalls) and len(smalls) == len(lines) and all(
        isinstance(s, cst.ImportFrom) and s.module is not None and cst.Module([]).code_for_node(s.module).startswith("apex")
        and any(isinstance(a.name, cst.Name) and a.name.value == "amp" for a in s.names)
        for s in smalls
    )


def _shown(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Call):
        return cst.Module([]).code_for_node(node.func).strip() + "(...)"
    return cst.Module([]).code_for_node(node).strip()
