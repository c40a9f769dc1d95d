"""AM406: the mixed precision a migration sets reaches forwards the script ran in full precision."""

from __future__ import annotations

import re

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.analysis.prepared import prepared_models
from migrator.rule import Example, Rule

# a function named for an evaluation (`test`, `validate`, `evaluate_coco`, `run_inference`)
_EVALUATION = re.compile(r"(?:^|_)(?:eval|valid|val|test|infer|predict)", re.IGNORECASE)


class PrecisionBeyondAutocast(Rule):
    """## What it does
    When a migration turns the script's autocast regions into the Accelerator's
    `mixed_precision` (AM401), reports the prepared model's uses outside those regions: a
    call of the model in full precision, or the model handed to an evaluation
    (`psnr, ssim = test(g_model, ...)`). Nothing is changed.

    ## Why is this bad?
    Like Accelerate's, the runtime's prepared model runs every forward pass under autocast
    once `mixed_precision` is set, not only inside `accelerator.autocast()`. An evaluation
    the script ran in float32 now runs in fp16 or bf16: its figures differ a little from the
    original's, and so may a choice made from them (the best checkpoint).

    ## Example
    ```python
    for x, y in loader:
        with torch.cuda.amp.autocast():
            loss = criterion(model(x), y)
        ...
    accuracy = evaluate(model, val_loader)  # float32 before, fp16 after the migration
    ```

    Use instead: accept the mixed-precision figures, as Accelerate's users do, or keep the
    script on full precision (no `mixed_precision`, the autocast regions as they were). An
    `autocast(enabled=False)` around the call does not turn it off: the prepared forward
    enters autocast itself.
    """

    code = "AM406"
    name = "precision-beyond-autocast"
    message = (
        "`{use}` ran `{model}` in full precision; with `mixed_precision` set, the prepared model runs "
        "every forward under autocast, here too: its figures may differ a little from the original's "
        "(and so may what is chosen from them)"
    )
    examples = (
        Example(
            before=(
                "import torch\n\nmodel = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for x in [torch.zeros(1, 2)]:\n    with torch.autocast(\"cuda\"):\n        loss = model(x).sum()\n"
                "    loss.backward()\n    opt.step()\nprint(evaluate(model))\n"
            ),
            at=("10:7",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        """Read before the migration (the script's autocast regions, the planned prepare) or
        after it (the file a migration wrote: `accelerator.autocast()` regions, the prepared
        models, the Accelerator's constant `mixed_precision`). A precision behind a flag
        (`"fp16" if args.amp else "no"`) is not reported: the full-precision path runs
        without it."""
        analysis = self.analysis
        patterns = analysis.patterns
        if patterns is None:
            return
        if analysis.has_accelerator:
            regions = [c.node for c in analysis.facts.calls if _accelerator_autocast(analysis, c.node)]
            models = {n for n in prepared_models(analysis) if analysis.roles.of(n) is Role.MODEL}
            always = _constant_precision(analysis)
        elif analysis.migrating and analysis.plan is not None:
            autocasts = [a for a in patterns.precision.autocasts if not a.disabled]
            regions = [a.call for a in autocasts]
            models = {n for n in analysis.plan.names if analysis.roles.of(n) is Role.MODEL}
            always = bool(autocasts) and all(a.value in ('"fp16"', '"bf16"') for a in autocasts)
        else:
            return
        if not regions or not always:
            return
        told: set[str] = set()
        for c in analysis.facts.calls:
            use = self._full_precision_use(c.node, models, regions)
            if use is not None and use[0] not in told:
                told.add(use[0])
                self.report(c.node, model=use[0], use=use[1])

    def _full_precision_use(self, call: cst.Call, models: set[str], regions: list[cst.Call]) -> tuple[str, str] | None:
        """(model, how it is used) for a call of a model, or of an evaluation handed one,
        outside every autocast region; None otherwise."""
        callee = dotted_name(call.func) or ""
        if callee in models:
            model, use = callee, f"{callee}(...)"
        else:
            handed = [dotted_name(a.value) for a in call.args if dotted_name(a.value) in models]
            if not handed or not _EVALUATION.search(callee.rpartition(".")[2]):
                return None
            model, use = handed[0], f"{callee}(...)"  # type: ignore[assignment]
        if self._inside(call, regions):
            return None
        return model, use

    def _inside(self, node: cst.CSTNode, regions: list[cst.Call]) -> bool:
        """Within a `with` whose items hold one of the autocast calls."""
        ids = {id(r) for r in regions}
        current = self.analysis.parent(node)
        while current is not None:
            if isinstance(current, cst.With) and any(id(item.item) in ids for item in current.items):
                return True
            current = self.analysis.parent(current)
        return False


def _accelerator_autocast(analysis, call: cst.Call) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value == "autocast" and dotted_name(func.value) in analysis.accelerator_names


def _constant_precision(analysis) -> bool:
    """`Accelerator(mixed_precision="fp16")` (or "bf16"): on for every run of the script."""
    for c in analysis.facts.calls:
        if (c.qualified or "").endswith("Accelerator") or dotted_name(c.node.func) == "Accelerator":
            for arg in c.node.args:
                if arg.keyword is not None and arg.keyword.value == "mixed_precision":
                    value = arg.value
                    return isinstance(value, cst.SimpleString) and value.evaluated_value in ("fp16", "bf16")
    return False
