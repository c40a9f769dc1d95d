"""AM224: a module's training step computes its loss with its own `forward`."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.rule import Example, Rule

_MODULE_BASES = {"torch.nn.Module", "torch.nn.modules.module.Module"}


class StepCallsItsOwnForward(Rule):
    """## What it does
    Reports a method of a `torch.nn.Module` subclass (other than `forward`) that takes a
    backward on what `self.forward(...)` or `self(...)` returned: a trainer that is itself
    the module to wrap (`FasterRCNNTrainer.train_step` calling `self.forward(imgs, ...)`,
    whose forward computes the losses from the detector's parts). A module that builds its
    optimizer over `self.parameters()` is the model its own methods train: a backward on
    what its layers or its other methods computed (`self.v(s)`, `self.fc1(x)`) is reported
    the same way. Nothing is changed.

    ## Why is this bad?
    DistributedDataParallel synchronises gradients only for a forward that goes through
    the wrapper: `prepared(inputs)`. Inside the module, `self` is the module itself, not
    the wrapper, so after `trainer = accelerator.prepare(trainer)` the step's
    `self.forward(...)` runs unwrapped, and the processes' copies train apart with no
    error. The optimizer preparing well is not enough: the module whose forward makes the
    loss is the one to prepare, and the loss must come from calling the prepared object.

    ## What to do by hand
    Prepare the trainer module with its optimizer, and compute the step's losses by
    calling the prepared object from outside (`losses = trainer(imgs, bboxes, labels)`,
    then `accelerator.backward(losses.total_loss)`).

    ## Example
    ```python
    class Trainer(nn.Module):
        def train_step(self, x, y):
            loss = self.forward(x, y)
            loss.backward()
    ```

    Use instead:
    ```python
    trainer, optimizer = accelerator.prepare(trainer, optimizer)
    loss = trainer(x, y)
    accelerator.backward(loss)
    ```
    """

    code = "AM224"
    name = "step-calls-its-own-forward"
    message = (
        "`{call}` in `{cls}.{method}` computes the loss the step trains on inside the module: once `{cls}` is "
        "prepared, DDP synchronises gradients only for a call of the prepared object; prepare `{cls}` and compute "
        "the loss by calling it from outside"
    )
    examples = (
        Example(
            before=(
                "import torch\nfrom torch import nn\n\n\nclass Trainer(nn.Module):\n"
                "    def __init__(self):\n        super().__init__()\n        self.net = nn.Linear(2, 1)\n\n"
                "    def forward(self, x):\n        return self.net(x).pow(2).mean()\n\n"
                "    def train_step(self, x):\n        loss = self.forward(x)\n        loss.backward()\n"
            ),
            at=("14:16",),
        ),
    )

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        imports = self.analysis.imports
        if not any((imports.qualify(b.value) or "") in _MODULE_BASES for b in node.bases):
            return
        methods = {s.name.value: s for s in node.body.body if isinstance(s, cst.FunctionDef)}
        computing = self._computing(methods) if _trains_itself(methods) else set()
        for name, statement in methods.items():
            if name != "forward":
                self._check(node, statement, computing)

    def _computing(self, methods: dict[str, cst.FunctionDef]) -> set[str]:
        """`self.fc1`, `self.pi`: the layers the module builds in `__init__` from torch.nn,
        and its methods that run them (directly or through each other)."""
        init = methods.get("__init__")
        found = set()
        for call in _calls(init) if init is not None else ():
            up = self.analysis.parent(call)
            if isinstance(up, cst.Assign) and len(up.targets) == 1 and up.value is call:
                target = dotted_name(up.targets[0].target) or ""
                if target.startswith("self.") and (self.analysis.imports.qualify(call.func) or "").startswith("torch.nn."):
                    found.add(target)
        changed = True
        while changed:
            more = {
                f"self.{name}" for name, method in methods.items()
                if name not in ("__init__", "forward") and f"self.{name}" not in found
                and any(dotted_name(c.func) in found for c in _calls(method))
            }
            found |= more
            changed = bool(more)
        return found

    def _check(self, cls: cst.ClassDef, method: cst.FunctionDef, computing: set[str]) -> None:
        calls = list(_calls(method))
        if not any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward" for c in calls):
            return
        for call in calls:
            name = dotted_name(call.func)
            if name in ("self.forward", "self") or name in computing:
                shown = cst.Module([]).code_for_node(call.func) + "(...)"
                self.report(call, call=shown, cls=cls.name.value, method=method.name.value)
                return


def _trains_itself(methods: dict[str, cst.FunctionDef]) -> bool:
    """An optimizer over `self.parameters()` built in the class (minimalRL's PPO,
    SR-GNN's SessionGraph): the module is the model its own methods train."""
    for method in methods.values():
        for call in _calls(method):
            if any(
                isinstance(a.value, cst.Call) and dotted_name(a.value.func) == "self.parameters" for a in call.args
            ) and "optim" in (dotted_name(call.func) or "").lower():
                return True
    return False


def _calls(node: cst.CSTNode):
    if isinstance(node, cst.Call):
        yield node
    for child in node.children:
        if not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            yield from _calls(child)
