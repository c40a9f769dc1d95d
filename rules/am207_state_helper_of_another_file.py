"""AM207: the prepared model handed to another file's function that saves or loads its state."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule


class StateHelperOfAnotherFile(Rule):
    """## What it does
    In a run of several files, finds a call of a function of another file of the run
    that saves or loads the state of a model it is given (`utils.load_checkpoint(path,
    model, optimizer)`, whose body calls `model.load_state_dict(...)`), where the
    argument is the prepared model, and the function itself is not migrated with the
    Accelerator (another caller cannot pass one). The argument becomes
    `accelerator.unwrap_model(model)`.

    ## Why is this bad?
    On N processes the prepared model is wrapped in DistributedDataParallel, whose state
    dict keys start with `module.`: loading a checkpoint saved from the plain model stops
    with missing and unexpected keys, and a state saved from the wrapper no longer loads
    into the plain model. The unwrapped model has the keys the checkpoint has, and is the
    same model (its parameters are the ones DDP trains).

    ## Example
    ```python
    model, optimizer = accelerator.prepare(model, optimizer)
    utils.load_checkpoint(restore_path, model, optimizer)
    ```

    Use instead:
    ```python
    model, optimizer = accelerator.prepare(model, optimizer)
    utils.load_checkpoint(restore_path, accelerator.unwrap_model(model), optimizer)
    ```

    ## Known limits
    Only in a run that holds both files (`accel-migrate DIR`); a file run alone cannot see
    what the function does with the model. Where no Accelerator reaches the call, it is
    reported without a fix.
    """

    code = "AM207"
    name = "state-helper-of-another-file"
    message = "`{call}` saves or loads the state of `{name}`, the prepared model: its keys carry DDP's `module.` prefix on N processes; pass `accelerator.unwrap_model({name})`"
    fix_title = "Pass `accelerator.unwrap_model(model)`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nimport utils\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\n"
                "utils.load_checkpoint('last.pt', model, optimizer)\n"
            ),
            after=(
                "import torch\nimport utils\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\n"
                "utils.load_checkpoint('last.pt', accelerator.unwrap_model(model), optimizer)\n"
            ),
            at=("9:34",),
            project_states=(("utils.load_checkpoint", (1,), ("model",)),),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        helpers = {spelling: (positions, names) for spelling, positions, names in self.ctx.config.project_states}
        spelling = dotted_name(node.func)
        if not helpers or spelling not in helpers:
            return
        analysis = self.analysis
        positions, names = helpers[spelling]
        models = {n for n in analysis.prepared if analysis.roles.of(n) is Role.MODEL}
        positional = [a for a in node.args if a.keyword is None and not a.star]
        for i, arg in enumerate(positional):
            if i in positions:
                self._check(node, arg, spelling, models)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in names:
                self._check(node, arg, spelling, models)

    def _check(self, call: cst.Call, arg: cst.Arg, spelling: str, models: set[str]) -> None:
        name = dotted_name(arg.value)
        if name not in models:
            return
        accelerator = self.analysis.accelerator_at(call)
        if accelerator is None:
            self.report(arg.value, call=f"{spelling}(...)", name=name)
            return
        new = cst.parse_expression(f"{accelerator}.unwrap_model({name})")
        self.report(arg.value, edits=[replace(arg.value, new)], call=f"{spelling}(...)", name=name)
