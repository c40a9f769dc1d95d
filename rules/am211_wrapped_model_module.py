"""AM211: `model.module` of a model wrapped by hand."""

from __future__ import annotations

import libcst as cst

from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule


class WrappedModelModule(Rule):
    """## What it does
    While a script is migrated from hand-made `DataParallel`/`DistributedDataParallel`,
    rewrites `model.module` (and the idiom `model.module if hasattr(model, "module") else
    model`) to `accelerator.unwrap_model(model)`.

    ## Why is this bad?
    `.module` existed because of the wrapper the migration removes. The prepared model is
    wrapped only on N processes, so `.module` raises `AttributeError` on one;
    `accelerator.unwrap_model(model)` returns the user's model in both cases.

    ## Example
    ```python
    model = nn.DataParallel(model)
    torch.save(model.module.state_dict(), path)
    ```

    Use instead:
    ```python
    torch.save(accelerator.unwrap_model(model).state_dict(), path)
    ```

    ## Known limits
    In a script that already has an Accelerator this is AM204's job (prepared-model-module).
    Assignments to `model.module` and code that cannot reach the Accelerator are
    reported, not changed.
    """

    code = "AM211"
    name = "wrapped-model-module"
    message = "`{name}.module` exists only while the model is wrapped; use `accelerator.unwrap_model({name})`{note}"
    fix_title = "Use `accelerator.unwrap_model(model)`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nimport torch.nn as nn\n\nmodel = nn.DataParallel(nn.Linear(2, 2))\n"
                "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nweight = model.module.weight\n"
            ),
            after=(
                "import torch\nimport torch.nn as nn\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n\n"
                "model = nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, opt = accelerator.prepare(model, opt)\nweight = accelerator.unwrap_model(model).weight\n"
            ),
            at=("6:10",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or analysis.has_accelerator or not analysis.migrating:
            return
        for access in analysis.patterns.distribution.module_accesses:
            model = access.body.value if isinstance(access, cst.IfExp) else access.value  # type: ignore[attr-defined]
            name = cst.Module([]).code_for_node(model).strip()
            accelerator = analysis.accelerator_at(access)
            up = analysis.parent(access)
            stored = isinstance(up, (cst.AssignTarget, cst.Del)) or (
                isinstance(up, (cst.AugAssign, cst.AnnAssign)) and up.target is access
            )
            if accelerator is None or stored:
                why = "it is assigned to" if stored else "the Accelerator cannot be reached from here"
                self.report(access, name=name, note=f" (left as written: {why})")
                continue
            new = cst.parse_expression(f"{accelerator}.unwrap_model({name})")
            self.report(access, edits=[replace(access, new.with_changes(lpar=access.lpar, rpar=access.rpar))], name=name, note="")
