"""AM107: a batch tensor turned to numpy, where the prepared loader now puts it on the device."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role
from migrator.analysis.loop import batch_names
from migrator.analysis.names import dotted_name
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule

# Methods between the batch and `.numpy()` that keep it a tensor on the same device.
_SAME_DEVICE = {"detach", "float", "double", "long", "int", "half", "squeeze", "unsqueeze", "flatten", "view", "reshape"}


class BatchToNumpyOnDevice(Rule):
    """## What it does
    In a loop over a prepared dataloader, rewrites `.numpy()` called on (a part of) the
    batch, `offsets = batch["offsets"].numpy()`, to `.cpu().numpy()`.

    ## Why is this bad?
    A DataLoader yields CPU tensors, so the original could call `.numpy()` on them. The
    prepared loader moves every tensor of the batch to the process's device; on a GPU
    `.numpy()` then raises "can't convert cuda:0 device type tensor to numpy". `.cpu()` of
    a CPU tensor is the tensor itself: nothing changes on a machine without a GPU.

    In a file the migration leaves alone, a method that a loop of another file of the run
    hands a batch of its loader (`self.debug(batch, ...)` in a base class's epoch loop, the
    method overridden in this file) gets the same finding, with where the batch comes
    from; nothing is changed there.

    ## Example
    ```python
    for batch in loader:
        offsets = batch["offsets"].numpy()
    ```

    Use instead:
    ```python
    for batch in loader:
        offsets = batch["offsets"].cpu().numpy()
    ```
    """

    code = "AM107"
    name = "batch-to-numpy-on-device"
    message = "`{expr}` turns a batch tensor to numpy: the prepared loader puts it on the device, where `.numpy()` raises{note}"
    fix_title = "Call `.cpu()` first"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "loader = torch.utils.data.DataLoader(torch.zeros(8, 2), batch_size=2)\n"
                "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
                "for x in loader:\n    values = x.numpy()\n    accelerator.backward(model(x).sum())\n    optimizer.step()\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "loader = torch.utils.data.DataLoader(torch.zeros(8, 2), batch_size=2)\n"
                "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
                "for x in loader:\n    values = x.cpu().numpy()\n    accelerator.backward(model(x).sum())\n    optimizer.step()\n"
            ),
            at=("10:14",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.migrating:
            self._batches_handed_in()
            return
        facts = analysis.facts
        prepared = analysis.prepared
        loops = [
            l for l in facts.loops
            if l.iter_name in prepared and analysis.roles.of(l.iter_name) is Role.DATALOADER
        ]
        for loop in loops:
            names = batch_names(loop, facts)
            for c in facts.calls:
                func = c.node.func
                if not (isinstance(func, cst.Attribute) and func.attr.value == "numpy" and not c.node.args):
                    continue
                if not any(l is loop.node for l in c.loops) or not _of_batch(func.value, names):
                    continue
                receiver = func.value
                moved = cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name("cpu")))
                self.report(
                    c.node, edits=[replace(c.node, c.node.with_changes(func=func.with_changes(value=moved)))],
                    expr=cst.Module([]).code_for_node(c.node), note="",
                )

    def _batches_handed_in(self) -> None:
        """A method a loop of another file of the run hands a loader's batch
        (project/batch_params.py): this file is left as it is, the finding says where."""
        facts = self.analysis.facts
        for qualified, param, where, loader in self.ctx.config.project_batch_params:
            for function in self.analysis.nodes("FunctionDef"):
                owner = facts.method_of.get(id(function))
                if owner is None or f"{owner.name.value}.{function.name.value}" != qualified:
                    continue
                names = _derived_in(facts, function, param)
                for c in facts.calls:
                    func = c.node.func
                    if c.scope is function and isinstance(func, cst.Attribute) and func.attr.value == "numpy" \
                            and not c.node.args and _of_batch(func.value, names):
                        note = _HANDED_IN.format(param=param, loader=loader, where=where)
                        self.report(c.node, expr=cst.Module([]).code_for_node(c.node), note=note)


_HANDED_IN = (
    " (left as written: `{param}` is a batch of `{loader}`, handed in at {where}, a loader the migration prepares "
    "or its findings ask to prepare; call `.cpu()` first: on a batch left on the CPU it changes nothing)"
)


def _derived_in(facts, function: cst.FunctionDef, param: str) -> set[str]:
    """`param` and the names the function binds from it (`meta = batch["meta"]`)."""
    names, changed = {param}, True
    while changed:
        changed = False
        for b in facts.bindings:
            if b.scope is function and b.name not in names and b.value is not None and _of_batch(b.element or b.value, names):
                names.add(b.name)
                changed = True
    return names


def _of_batch(expr: cst.BaseExpression, names: set[str]) -> bool:
    """`batch`, `batch["x"]`, `batch.x`, `x.detach()` ... of a batch name, with no `.cpu()`."""
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value not in _SAME_DEVICE:
                return False
            expr = expr.func.value
        elif isinstance(expr, (cst.Subscript, cst.Attribute)):
            if dotted_name(expr) in names:
                return True
            expr = expr.value
        else:
            return dotted_name(expr) in names
