"""AM930: a notebook trains at the top level of its cells, so it can only use one process."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.loop import training_functions
from migrator.rule import Example, FixAvailability, Rule


class NotebookTopLevelTraining(Rule):
    """## What it does
    Finds a notebook whose training loop (a loop that calls `backward`) runs at the top
    level of its cells, and suggests moving the training into a function started by
    `notebook_launcher(training_function, num_processes=N)`, which the runtime (and Hugging
    Face Accelerate, under the same name) provides.

    ## Why is this bad?
    A notebook kernel is one process. To train on N processes the code has to be something
    N processes can each run, and a function is that thing: `notebook_launcher` starts N
    workers on this machine (forked from the kernel, so functions defined in the notebook
    work), runs the function in each with the Accelerator forming the process group, and
    raises in the notebook if a rank fails. Top-level cells run only in the kernel.

    ## Example
    ```python
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(dataset, batch_size=32)
    for batch in loader:
        loss = model(batch).sum()
        loss.backward()
    ```

    Use instead:
    ```python
    from runtime import Accelerator, notebook_launcher

    def training_function():
        accelerator = Accelerator()  # inside: each process makes its own
        model = Net()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(dataset, batch_size=32)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            loss = model(batch).sum()
            accelerator.backward(loss)

    notebook_launcher(training_function, num_processes=2)
    ```

    A cell that calls a function which trains (`train_one_epoch()` in a loop, `main()`)
    is reported too: launch that function (or one that sets up and calls it) instead.

    ## Known limits
    Reported, not rewritten: which cells belong in the function (data loading, plotting,
    evaluation) is the author's choice. Create the Accelerator inside the function, not in
    an earlier cell. Scripts are never reported: `accel-launch` runs a whole script on N
    processes.
    """

    code = "AM930"
    name = "notebook-top-level-training"
    message = (
        "Training runs at the notebook's top level, on one process; wrap it in a function and "
        "start it with `notebook_launcher(function, num_processes=N)` from {module}"
    )
    fix_title = "Wrap the training in a function started by notebook_launcher"
    fix = FixAvailability.NEVER
    examples = (
        Example(
            before=(
                "import torch\n\nmodel = torch.nn.Linear(2, 1)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for x in [torch.ones(2)]:\n    model(x).sum().backward()\n    optimizer.step()\n"
            ),
            at=("5:1",),
            path="example.ipynb",
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        if not self.ctx.is_notebook:
            return
        facts = self.analysis.facts
        trainers = training_functions(facts)
        reported: set[int] = set()
        for call in facts.calls:
            func = call.node.func
            backward = isinstance(func, cst.Attribute) and func.attr.value == "backward"
            trains = isinstance(func, cst.Name) and func.value in trainers
            if call.scope is not node or not (backward or trains):
                continue
            statement = self._top_level_statement(call.node, node)
            if statement is not None and id(statement) not in reported:
                reported.add(id(statement))
                self.report(statement, module=self.ctx.target.module)

    def _top_level_statement(self, inner: cst.CSTNode, module: cst.Module) -> cst.CSTNode | None:
        current: cst.CSTNode | None = inner
        while current is not None and self.analysis.parent(current) is not module:
            current = self.analysis.parent(current)
        return current
