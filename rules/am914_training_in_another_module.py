"""AM914: the model, optimizer or loader is handed to a training function of another module."""

from __future__ import annotations

import re

import libcst as cst

from migrator.analysis import Role
from migrator.rule import Example, Rule

# Roots of imports that are libraries, not the project's own modules.
_LIBRARIES = frozenset({
    "torch", "torchvision", "torchaudio", "torchtext", "transformers", "datasets", "evaluate",
    "accelerate", "runtime", "numpy", "np", "sklearn", "scipy", "pandas", "tqdm", "timm",
    "lightning", "pytorch_lightning", "matplotlib", "wandb", "tensorboard", "os", "sys",
    "math", "random", "time", "json", "logging", "functools", "itertools", "copy", "diffusers",
})
_TRAINING_WORDS = re.compile(r"train|eval|fit|test|valid|epoch|step|loop|run|infer|predict", re.IGNORECASE)
_ROLES = {Role.MODEL: "model", Role.OPTIMIZER: "optimizer", Role.DATALOADER: "loader", Role.SCHEDULER: "scheduler"}


class TrainingInAnotherModule(Rule):
    """## What it does
    Reports a call that hands the model, optimizer, loader or scheduler to a training or
    evaluation function imported from another module of the project
    (`engine.train_fn(loader, model, optimizer, device, scheduler)`), once per function.
    Nothing is changed.

    ## Why is this bad?
    The migration of this file prepares the objects, but the `loss.backward()`, the
    clipping, the metrics and the prints live in the other module. Left alone, that module
    trains without the Accelerator's backward (no loss scaling, no accumulation) and
    computes metrics on this process's share of the data as if they were global.

    ## Example
    ```python
    import engine

    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    engine.train_fn(loader, model, optimizer, device)
    ```

    Use instead: migrate the other module too and pass the Accelerator in (its own
    findings, AM913, name each function that needs it):
    ```python
    engine.train_fn(loader, model, optimizer, device, accelerator=accelerator)
    ```

    ## Known limits
    A module counts as the project's own when its import root is not a known library;
    only functions whose names say they train or evaluate are reported.
    """

    code = "AM914"
    name = "training-in-another-module"
    message = (
        "`{call}` from module `{module}` receives the {what}: its backward, metrics and prints "
        "need the Accelerator too; migrate `{module}` as well (its own findings say what it needs)"
    )
    examples = (
        Example(
            before=(
                "import torch\nimport engine\n\nmodel = torch.nn.Linear(2, 2)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "engine.train_fn(model, optimizer)\n"
            ),
            at=("6:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        seen: set[str] = set()
        for c in analysis.facts.calls:
            qualified = c.qualified or ""
            module, _, function = qualified.rpartition(".")
            if not module or module.split(".")[0] in _LIBRARIES or not _TRAINING_WORDS.search(function):
                continue
            if c.func in analysis.facts.functions or qualified in seen:
                continue
            given = [_ROLES[r] for r in (_role(analysis, a.value) for a in c.node.args) if r in _ROLES]
            if not given:
                continue
            seen.add(qualified)
            what = ", ".join(dict.fromkeys(given))
            self.report(c.node, call=c.func or function, module=module, what=what)


def _role(analysis, expr: cst.BaseExpression) -> Role | None:
    name = cst.Module([]).code_for_node(expr).strip()
    return analysis.roles.of(name)
