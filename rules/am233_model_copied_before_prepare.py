"""AM233: a copy of the model's weights taken before prepare(), in a run not seeded alike."""

from __future__ import annotations

from migrator.analysis.early_copies import early_copies
from migrator.analysis.names import code_of
from migrator.rule import Example, Rule


class ModelCopiedBeforePrepare(Rule):
    """## What it does
    In a script being migrated, names a copy of a prepared model's weights taken above
    its prepare(): `ema = copy.deepcopy(model)`, `AveragedModel(model)`, an EMA class
    built from it, `copy.deepcopy(model.state_dict())`, or a loop over
    `model.named_parameters()` that keeps each weight (`ema.register(name, param.data)`,
    `param.data.clone()`), when nothing in the file seeds torch alike on every process
    (`torch.manual_seed(args.seed)`, a `set_seed(...)` helper) and the weights were not
    loaded before the copy. Nothing is changed.

    ## Why is this bad?
    Under `accel-launch` every process builds the model from its own random
    initialisation. prepare() hands every process process 0's weights, but the copy
    keeps the process's own: an exponential average, a best model or a shadow of the
    weights differs on every process. Process 0's copy is the single-process one; every
    other process evaluates, compares and saves its own (a best model picked on each
    process, an average that later replaces the weights, metrics gathered across
    processes from N different models).

    ## What to do by hand
    Seed torch alike on every process before the model is built
    (`torch.manual_seed(args.seed)`), or take the copy after prepare() from
    `accelerator.unwrap_model(model)`.

    ## Example
    ```python
    model = Net().to(device)
    ema = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ```

    Use instead:
    ```python
    torch.manual_seed(args.seed)  # the same on every process
    model = Net()
    ema = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    ```

    ## Known limits
    Only copies in the scope that prepares, above the prepare() the migration writes. A
    seed anywhere in the file counts, wherever it runs; a seed set by another file of the
    run is not seen.
    """

    code = "AM233"
    name = "model-copied-before-prepare"
    message = (
        "`{copy}` copies `{model}`'s weights before prepare(), with torch not seeded alike on every process: each "
        "process copies its own random initialisation, while prepare() gives `{model}` process 0's weights, so the "
        "copy differs on every process; seed torch alike before `{model}` is built (`torch.manual_seed(seed)`), or "
        "copy `accelerator.unwrap_model({model})` after prepare()"
    )
    examples = (
        Example(
            before=(
                "import copy\nimport torch\n\nmodel = torch.nn.Linear(2, 1)\nema = copy.deepcopy(model)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for step in range(3):\n    model(torch.ones(2)).sum().backward()\n    optimizer.step()\n"
            ),
            after=None,
            at=("5:7",),
        ),
    )

    def visit_Module(self, node) -> None:
        for copy in early_copies(self.analysis):
            shown = code_of(copy.node).splitlines()[0].rstrip(":")
            self.report(copy.node, copy=shown, model=copy.model)
