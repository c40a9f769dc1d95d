"""AM912: a script that trains without a torch.optim optimizer."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role
from migrator.rule import Example, Rule


class OptimizerFreeTraining(Rule):
    """## What it does
    Reports a script that calls `.backward()` but has no optimizer the migrator can find
    (parameters are updated by hand, `p.data.add_(p.grad, alpha=-lr)`, as in
    pytorch/examples word_language_model). Nothing in the script is changed.

    ## Why is this bad?
    The migration is built around what `accelerator.prepare()` takes: the model, the
    optimizer, the dataloaders. Without an optimizer the migrator cannot tell where
    training is set up, so it creates no Accelerator and leaves the script single-process.

    ## What to do by hand
    Create an optimizer (`optimizer = torch.optim.SGD(model.parameters(), lr=lr)`),
    replace the hand-written update with `optimizer.step()` (and `model.zero_grad()` with
    `optimizer.zero_grad()`), then run the migrator again. Data held in tensors rather than
    a DataLoader (`get_batch(source, i)`) is not sharded across processes: wrap it in a
    Dataset and a DataLoader so `prepare()` can split it.

    ## Example
    ```python
    loss.backward()
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    ```

    Use instead:
    ```python
    loss.backward()
    optimizer.step()
    ```
    """

    code = "AM912"
    name = "optimizer-free-training"
    message = "`{call}` trains without a torch.optim optimizer, so nothing can be prepared; create an optimizer and rerun the migration"
    examples = (
        Example(
            before=(
                "import torch\n\nmodel = torch.nn.Linear(2, 1)\nloss = model(torch.zeros(1, 2)).sum()\nloss.backward()\n"
                "for p in model.parameters():\n    p.data.add_(p.grad, alpha=-0.1)\n"
            ),
            at=("5:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.migrating or analysis.roles.names(Role.OPTIMIZER):
            return
        for c in analysis.facts.calls:
            func = c.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "backward" and not c.node.args:
                receiver = cst.Module([]).code_for_node(func.value).strip()
                if (analysis.imports.qualify(func.value) or "").startswith("torch"):
                    continue
                self.report(c.node, call=f"{receiver}.backward()" if len(receiver) < 30 else "backward()")
                return
