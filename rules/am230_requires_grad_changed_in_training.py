"""AM230: parameters frozen or unfrozen while training, after the model is wrapped."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.reach import run_by_other_files
from migrator.rule import Example, Rule

# loops that walk a model's parts, not the training's epochs or batches
_PARTS = ("parameters", "children", "modules", "layers", "items()", "open_layers")


class RequiresGradChangedInTraining(Rule):
    """## What it does
    Reports a change of which parameters need a gradient made while training runs: a
    loop over `parameters()` setting `p.requires_grad`, `module.requires_grad_(False)`,
    or a call of another file's helper that does either (deep-person-reid's
    `open_specified_layers(model, ...)` / `open_all_layers(model)` at the start of each
    epoch), in a loop, or in a function a loop of the file calls. In a script being
    migrated, and in code other files of the run call on every process. Nothing is
    changed, and the migration of such a script is not written (AM960 says why).

    ## Why is this bad?
    DistributedDataParallel fixes, when prepare() wraps the model, the parameters whose
    gradients it averages: those that need one then. A layer frozen later gets no gradient,
    and DDP stops at the next step waiting for it; a layer frozen at prepare() and unfrozen
    later is trained on each process but never averaged, so the copies drift apart in
    silence. Keep every parameter trainable when the model is prepared and create the
    Accelerator with `kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)]`:
    DDP then looks each step for the parameters that got no gradient.

    ## Example
    ```python
    for epoch in range(epochs):
        for p in model.backbone.parameters():
            p.requires_grad = epoch >= warmup
        train_one_epoch(model, loader, optimizer)
    ```

    Use instead: the same loop, with the backbone trainable at prepare() and
    `Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])`.

    ## Known limits
    `requires_grad_(True)` alone (an input made differentiable, a gradient penalty) is not
    read as a change of the model's parameters; a freeze done once before prepare() is
    fine and not reported.
    """

    code = "AM230"
    name = "requires-grad-changed-in-training"
    message = (
        "{what} changes which parameters need a gradient while training runs: DDP fixed that set when prepare() "
        "wrapped the model, so a layer frozen now stops the next step and one unfrozen now is never averaged across "
        "processes; keep every parameter trainable at prepare() and create the Accelerator with "
        "`DistributedDataParallelKwargs(find_unused_parameters=True)`"
    )
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\n"
                "for epoch in range(4):\n"
                "    for p in accelerator.unwrap_model(model)[0].parameters():\n"
                "        p.requires_grad = epoch >= 2\n"
                "    optimizer.zero_grad()\n"
                "    accelerator.backward(model(torch.randn(2, 4)).sum())\n"
                "    optimizer.step()\n"
            ),
            at=("9:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        config = self.ctx.config
        shared = not analysis.migrating and bool(config.run_callers)
        if not analysis.migrating and not shared:
            return
        helpers = set(config.project_freezers)
        sites: list[tuple[cst.CSTNode, str]] = []
        for loop in analysis.nodes("For"):
            target = self._toggled(loop)  # type: ignore[arg-type]
            if target is not None:
                sites.append((loop, f"`{target}.requires_grad = ...`"))
        for fact in analysis.facts.calls:
            func = fact.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_" and _false_given(fact.node):
                sites.append((fact.node, f"`{dotted_name(func.value) or 'module'}.requires_grad_(False)`"))
            elif dotted_name(func) in helpers:
                sites.append((fact.node, f"`{dotted_name(func)}()`"))
        for site, what in sites:
            if not self._during_training(site, 0):
                continue
            if shared and not run_by_other_files(analysis, site, config.run_callers, config.project_unpassed):
                continue
            self.report(site, what=what)

    def _toggled(self, loop: cst.For) -> str | None:
        """The loop variable of `for p in ....parameters():` whose body sets `p.requires_grad`."""
        if "parameters(" not in cst.Module([]).code_for_node(loop.iter) or not isinstance(loop.target, cst.Name):
            return None
        name = loop.target.value
        for assign in self.analysis.nodes_under(loop, "Assign"):
            for target in assign.targets:  # type: ignore[attr-defined]
                value = target.target
                if isinstance(value, cst.Attribute) and value.attr.value == "requires_grad" and dotted_name(value.value) == name:
                    return name
        return None

    def _during_training(self, node: cst.CSTNode, depth: int) -> bool:
        """`node` runs in a loop of its function that is not a walk over the model's parts,
        or in a function a call in such a loop reaches (through up to 3 calls)."""
        analysis = self.analysis
        current = analysis.parent(node)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
            if isinstance(current, cst.While) or isinstance(current, cst.For) and not any(
                part in cst.Module([]).code_for_node(current.iter) for part in _PARTS
            ):
                return True
            current = analysis.parent(current)
        function = analysis.branches.function_of(node)
        if function is None or depth >= 3:
            return False
        return any(self._during_training(call, depth + 1) for call in analysis.branches.callers(function))


def _false_given(call: cst.Call) -> bool:
    return bool(call.args) and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == "False"
