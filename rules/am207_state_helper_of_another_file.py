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
    Accelerator (another caller cannot pass one), or is but another of its calls hands it
    the plain model (`load_checkpoint(model, ...)` above prepare() to resume, and again
    into the prepared model a training function returns): the function then gets the
    plain model at every call, and the Accelerator (`map_location=accelerator.device`).
    The argument becomes `accelerator.unwrap_model(model)`. The same for a method of one of the run's classes
    called through its instance (`es = utils.EarlyStopping(...)`, then `es(score, model)`
    whose `__call__` hands the model to a method that saves its state_dict), when the run
    cannot give the class the Accelerator (it does when it can: the callers' stub makes
    the same method calls, the class gets `accelerator` in `__init__` and AM510 saves once,
    unwrapped). When the helper writes the file with torch.save, a second finding says it
    does so on every process.

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
    message = "`{call}` {what}"
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
            project_states=(("utils.load_checkpoint", (1,), ("model",), False),),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        helpers = {spelling: rest for spelling, *rest in self.ctx.config.project_states}
        spelling = dotted_name(node.func)
        if not helpers or spelling not in helpers:
            return
        analysis = self.analysis
        positions, names, writes = helpers[spelling]
        models = {n for n in analysis.prepared if analysis.roles.of(n) is Role.MODEL}
        positional = [a for a in node.args if a.keyword is None and not a.star]
        handed = [a for i, a in enumerate(positional) if i in positions]
        handed += [a for a in node.args if a.keyword is not None and a.keyword.value in names]
        for arg in handed:
            name = dotted_name(arg.value)
            unwrapped = _unwrapped(arg.value)
            if name in models and _before_its_prepare(analysis, node, name):
                continue  # `load_checkpoint(model, ...)` above the prepare(): the plain model
            if name in models:
                self._unwrap(node, arg, spelling, name)
            elif unwrapped not in models:
                continue
            if writes:
                self.report(node, call=f"{spelling}(...)", what=_WRITES.format(name=name or unwrapped))

    def _unwrap(self, call: cst.Call, arg: cst.Arg, spelling: str, name: str) -> None:
        what = _UNWRAP.format(name=name)
        accelerator = self.analysis.accelerator_at(call)
        if accelerator is None:
            self.report(arg.value, call=f"{spelling}(...)", what=what)
            return
        new = cst.parse_expression(f"{accelerator}.unwrap_model({name})")
        self.report(arg.value, edits=[replace(arg.value, new)], call=f"{spelling}(...)", what=what)


def _before_its_prepare(analysis, call: cst.Call, name: str) -> bool:
    """`name` is prepared in the call's own function (by a prepare() there, or the one the
    migration inserts), and only below the call."""
    scope = analysis.scope_of(call)
    line = analysis.position(call).start.line
    lines = [analysis.position(p.call).start.line for p in analysis.prepare_calls if name in p.targets and analysis.scope_of(p.call) is scope]
    plan = analysis.plan
    if plan is not None and plan.block.scope is scope:
        lines += [analysis.position(g.after).end.line + 1 for g in plan.groups if name in g.names]
    return bool(lines) and all(at > line for at in lines)


def _unwrapped(value: cst.BaseExpression) -> str | None:
    """`model` of `accelerator.unwrap_model(model)` (a migrated call, linted again)."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "unwrap_model" and value.args:
        return dotted_name(value.args[0].value)
    return None


_UNWRAP = (
    "saves or loads the state of `{name}`, the prepared model: its keys carry DDP's `module.` prefix on N "
    "processes; pass `accelerator.unwrap_model({name})`"
)
_WRITES = (
    "writes the state of `{name}` to a file with torch.save on every process, N writers of one file: make "
    "that save run on the main process only (`if accelerator.is_main_process:` where it is called, when "
    "saving is all it does; in the helper otherwise, with the rest of it left to every process), and "
    "`accelerator.wait_for_everyone()` before any process reads the file back"
)
