"""AM230: parameters frozen or unfrozen while training, after the model is wrapped."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.freezing import PART_WALKS
from migrator.analysis.reach import run_by_other_files
from migrator.rule import Example, Rule

# loops that walk a model's parts, not the training's epochs or batches
_PARTS = ("parameters", "children", "modules", "layers", "items()")


class RequiresGradChangedInTraining(Rule):
    """## What it does
    Reports a change of which parts of a model need a gradient made while training runs:
    a loop over a part's `parameters()` (`model.backbone`, `model[0]`, a module a loop
    over `named_children()` hands out) setting `p.requires_grad`,
    `model.backbone.requires_grad_(False)`, or a call of another file's helper that does
    either (deep-person-reid's `open_specified_layers(model, ...)` at the start of each
    epoch), in a loop, or in a function a loop of the file calls; and a part a module's
    `forward` runs under `torch.set_grad_enabled(flag)`, the flag one of its parameters
    (BigGAN's `G_D` runs its generator so, without gradients in the discriminator's step).
    A whole model frozen and opened again (a GAN's discriminator during the generator's step) is not reported:
    DDP handles it. In a script being
    migrated, and in code other files of the run call on every process. Nothing is
    changed, and the migration of such a script is not written (AM960 says why).

    ## Why is this bad?
    DistributedDataParallel fixes, when prepare() wraps the model, the parameters whose
    gradients it averages: those that need one then. A part frozen later gets no gradient,
    and DDP stops at the next step waiting for it (a probe with torch 2.13 and gloo:
    "Expected to have finished reduction in the prior iteration"); a layer frozen at prepare() and unfrozen
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
        parts = self._part_variables()
        sites: list[tuple[cst.CSTNode, str, set[str]]] = []
        for loop in analysis.nodes("For"):
            owner = _parameters_of(loop.iter)  # type: ignore[attr-defined]
            if owner is not None and _is_part(owner, parts) and self._sets_requires_grad(loop):  # type: ignore[arg-type]
                shown = cst.Module([]).code_for_node(owner)
                sites.append((loop, f"`{shown}`'s `requires_grad`", _names_in(owner)))
        for fact in analysis.facts.calls:
            func = fact.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_" and _false_given(fact.node) and _is_part(func.value, parts):
                sites.append((fact.node, f"`{cst.Module([]).code_for_node(func.value)}.requires_grad_(False)`", _names_in(func.value)))
            elif dotted_name(func) in helpers:
                sites.append((fact.node, f"`{dotted_name(func)}()`", set()))
        switched = self._grad_switched_parts()
        sites += switched
        for site, what, walked in sites:
            if not any(site is s for s, *_ in switched) and not self._during_training(site, walked, 0):
                continue  # a forward runs at every step
            if shared and not run_by_other_files(analysis, site, config.run_callers, config.project_unpassed):
                continue
            self.report(site, what=what)

    def _grad_switched_parts(self) -> list[tuple[cst.CSTNode, str, set[str]]]:
        """`with torch.set_grad_enabled(train_G): G_z = self.G(z)` in a module's `forward`,
        the switch one of its parameters (BigGAN's G_D, run with `train_G=False` for the
        discriminator's step): on those steps the part's parameters get no gradient."""
        analysis = self.analysis
        out = []
        for with_ in analysis.nodes("With"):
            function = analysis.branches.function_of(with_)
            if function is None or function.name.value != "forward" or id(function) not in analysis.facts.method_of:
                continue
            params = {p.name.value for p in function.params.params}
            for item in with_.items:  # type: ignore[attr-defined]
                call = item.item
                if not (isinstance(call, cst.Call) and (analysis.imports.qualify(call.func) or "") == "torch.set_grad_enabled"):
                    continue
                if not (call.args and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value in params):
                    continue
                parts = sorted({
                    dotted_name(n.func) for n in analysis.nodes_under(with_.body, "Call")  # type: ignore[attr-defined]
                    if isinstance(n.func, cst.Attribute) and dotted_name(n.func.value) == "self"
                })
                if parts:
                    switch = call.args[0].value.value
                    out.append((call, f"`{parts[0]}(...)` under `torch.set_grad_enabled({switch})`", set()))
        return out

    def _part_variables(self) -> set[str]:
        """Names a loop binds to a model's parts (`for name, module in model.named_children()`)."""
        out: set[str] = set()
        for loop in self.analysis.nodes("For"):
            if isinstance(loop.iter, cst.Call) and isinstance(loop.iter.func, cst.Attribute) and loop.iter.func.attr.value in PART_WALKS:  # type: ignore[attr-defined]
                out |= _names_in(loop.target)  # type: ignore[attr-defined]
        return out

    def _sets_requires_grad(self, loop: cst.For) -> bool:
        names = _names_in(loop.target)
        for assign in self.analysis.nodes_under(loop, "Assign"):
            for target in assign.targets:  # type: ignore[attr-defined]
                value = target.target
                if isinstance(value, cst.Attribute) and value.attr.value == "requires_grad" and dotted_name(value.value) in names:
                    return True
        return False

    def _during_training(self, node: cst.CSTNode, walked: set[str], depth: int) -> bool:
        """`node` runs in a loop of its function that is not a walk over the model's parts
        (a loop binding a name the part is reached through, or over `parameters()`,
        `children()`...), or in a function a call in such a loop reaches (up to 3 calls)."""
        analysis = self.analysis
        current = analysis.parent(node)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
            if isinstance(current, cst.While):
                return True
            if isinstance(current, cst.For) and not _names_in(current.target) & walked and not any(
                part in cst.Module([]).code_for_node(current.iter) for part in _PARTS
            ):
                return True
            current = analysis.parent(current)
        function = analysis.branches.function_of(node)
        if function is None or depth >= 3:
            return False
        return any(self._during_training(call, set(), depth + 1) for call in analysis.branches.callers(function))


def _parameters_of(iterated: cst.BaseExpression) -> cst.BaseExpression | None:
    """`X` of `X.parameters()`."""
    if isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute) and iterated.func.attr.value == "parameters":
        return iterated.func.value
    return None


def _is_part(owner: cst.BaseExpression, parts: set[str]) -> bool:
    """`model.backbone`, `model[0]`, `self.model.backbone`, or a part a loop hands out; not
    a whole model (`model`, `self.netD`: DDP handles a whole model frozen for a while, a
    GAN's discriminator during the generator's step) nor a copy (`copy.deepcopy(model)`)."""
    steps, node = 0, owner
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        steps, node = steps + 1, node.value
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "unwrap_model":
        return steps > 0  # `accelerator.unwrap_model(model)[0]`: the user's model, a part of it
    if not isinstance(node, cst.Name):
        return False
    return node.value in parts if steps == 0 else steps > (1 if node.value == "self" else 0)


def _names_in(node: cst.CSTNode) -> set[str]:
    if isinstance(node, cst.Name):
        return {node.value}
    out: set[str] = set()
    for child in node.children:
        out |= _names_in(child)
    return out


def _false_given(call: cst.Call) -> bool:
    return bool(call.args) and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == "False"
