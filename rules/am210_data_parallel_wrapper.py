"""AM210: `nn.DataParallel(model)` / `DistributedDataParallel(model, ...)` by hand."""

from __future__ import annotations

import libcst as cst

from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule


class DataParallelWrapper(Rule):
    """## What it does
    Removes hand-made model wrapping: `model = nn.DataParallel(model)` and
    `model = DistributedDataParallel(model, device_ids=[local_rank])` go (with an `if`
    left holding nothing, e.g. `if torch.cuda.device_count() > 1:`), and a wrapper around
    a construction keeps the construction: `model = nn.DataParallel(Net())` becomes
    `model = Net()`.

    ## Why is this bad?
    `accelerator.prepare(model)` wraps the model in DistributedDataParallel itself, with
    this process's device. Wrapping it again by hand nests two wrappers (and
    `DataParallel` inside one process fights the launcher's one-process-per-GPU layout);
    `DistributedDataParallel` without a process group fails on one process.

    ## Example
    ```python
    model = Net()
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    ```

    Use instead:
    ```python
    model = Net()
    ```

    ## See also
    AM211 rewrites `model.module`, which only existed because of the wrapper.
    """

    code = "AM210"
    name = "data-parallel-wrapper"
    message = "`{kind}` wraps the model by hand; accelerator.prepare() wraps it for this process"
    fix_title = "Remove the hand-made wrapper"
    fix = FixAvailability.ALWAYS
    examples = (
        Example(
            before=(
                "import torch\nimport torch.nn as nn\n\nmodel = nn.Linear(2, 2)\n"
                "if torch.cuda.device_count() > 1:\n    model = nn.DataParallel(model)\n"
                "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            ),
            after=(
                "import torch\nimport torch.nn as nn\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n\n"
                "model = nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, opt = accelerator.prepare(model, opt)\n"
            ),
            at=("6:13",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        facts = analysis.patterns.distribution
        for wrap in facts.wraps:
            fix = facts.removal(wrap.statement) if wrap.statement is not None else None
            inner = wrap.inner.with_changes(lpar=[], rpar=[]) if isinstance(wrap.inner, (cst.Name, cst.Attribute, cst.Call)) else wrap.inner
            edits = fix if fix is not None else [replace(wrap.call, inner)]
            self.report(wrap.call, edits=edits, remove_imports=facts.import_cleanup, kind=wrap.kind)
