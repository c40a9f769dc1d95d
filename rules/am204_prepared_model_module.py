"""AM204: `model.module` on a prepared model instead of `accelerator.unwrap_model(model)`."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.prepared import accelerator_name_at
from migrator.analysis.wrapped import wrapped_uses
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule


class PreparedModelModule(Rule):
    """## What it does
    Finds `model.module` where `model` was returned by `accelerator.prepare()` (after the
    prepare in the same function, in functions using the module-level prepared model, and
    `self.model.module` anywhere once `self.model` is prepared), and rewrites it to
    `accelerator.unwrap_model(model)` where the Accelerator is in scope.

    ## Why is this bad?
    `.module` exists only while the model is wrapped in DistributedDataParallel, which
    happens on N processes but not on one: the same script raises
    `AttributeError: 'Net' object has no attribute 'module'` when run on one GPU or on
    the CPU, and under other wrappers (torch.compile, DeepSpeed, FSDP) `.module` is not the
    user's model at all. `accelerator.unwrap_model` removes whatever wrappers there are and
    is a no-op when there are none.

    ## Example
    ```python
    model, optimizer = accelerator.prepare(model, optimizer)
    outputs = model.module.generate(inputs)
    ```

    Use instead:
    ```python
    model, optimizer = accelerator.prepare(model, optimizer)
    outputs = accelerator.unwrap_model(model).generate(inputs)
    ```

    ## Known limits
    A model passed to a plain function is followed (`def export(m): m.module...` called
    with the prepared model); one reached through a container or a method's parameter is
    not. Assigning to `model.module` is reported without a fix.

    ## See also
    - huggingface/transformers#18974: `'DistributedDataParallel' object has no attribute
      'generate'`; `accelerator.unwrap_model(model).generate` works where `.module` did not
      (https://github.com/huggingface/transformers/issues/18974)
    - lucidrains/magvit2-pytorch#22: attribute errors under Accelerate's DDP wrapping,
      fixed by unwrapping everywhere
    """

    code = "AM204"
    name = "prepared-model-module"
    message = "`{name}.module` exists only when the model is wrapped (N processes); use `unwrap_model`"
    fix_title = "Use `accelerator.unwrap_model(model)`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nmodel = accelerator.prepare(model)\nweight = model.module.weight\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nmodel = accelerator.prepare(model)\n"
                "weight = accelerator.unwrap_model(model).weight\n"
            ),
            at=("7:10",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        for use in wrapped_uses(self.analysis):
            if use.attr == "module":
                self._check(use.attribute, use.name)

    def _check(self, node: cst.Attribute, name: str) -> None:
        accelerator = self.analysis.accelerator_at(node) or accelerator_name_at(self.analysis, node)
        if self._stored(node) or accelerator is None:
            self.report(node, name=name)
            return
        new = cst.parse_expression(f"{accelerator}.unwrap_model({name})")
        self.report(node, edits=[replace(node, new)], name=name)

    def _stored(self, node: cst.Attribute) -> bool:
        """`model.module = x` / `del model.module`: a call cannot stand there."""
        up = self.analysis.parent(node)
        return isinstance(up, (cst.AssignTarget, cst.Del)) or (
            isinstance(up, (cst.AugAssign, cst.AnnAssign)) and up.target is node
        )

