"""AM210: `nn.DataParallel(model)` / `DistributedDataParallel(model, ...)` by hand."""

from __future__ import annotations

import os

import libcst as cst

from migrator.analysis.reach import RUN_CALLS_IT, run_by_other_files
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

    In a file that gets no Accelerator but whose code the run's training calls (a model
    factory, a base class whose subclass in another file trains), the wrap is reported
    and left as written: the model is prepared where that file is not.

    ## See also
    AM211 rewrites `model.module`, which only existed because of the wrapper.
    """

    code = "AM210"
    name = "data-parallel-wrapper"
    message = "`{kind}` wraps the model by hand; accelerator.prepare() wraps it for this process{note}"
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
        if analysis.patterns is None:
            return
        facts = analysis.patterns.distribution
        if not analysis.migrating:
            self._in_code_the_run_calls(facts.wraps)
            self._handed_to_training(facts.wraps)
            return
        for wrap in facts.wraps:
            fix = facts.removal(wrap.statement) if wrap.statement is not None else None
            inner = wrap.inner.with_changes(lpar=[], rpar=[]) if isinstance(wrap.inner, (cst.Name, cst.Attribute, cst.Call)) else wrap.inner
            edits = fix if fix is not None else [replace(wrap.call, inner)]
            self.report(wrap.call, edits=edits, remove_imports=facts.import_cleanup, kind=wrap.kind, note="")

    def _in_code_the_run_calls(self, wraps) -> None:
        """pix2pixHD's `create_model()` wraps the model it returns to train.py; st-gcn's
        `IO.gpu()` wraps the model of the subclass that trains it. Under the launcher each
        process would spread its batch over every GPU it sees, and the model prepared by
        the run would be wrapped twice."""
        names = self.ctx.config.run_callers
        for wrap in wraps:
            if run_by_other_files(self.analysis, wrap.call, names, self.ctx.config.project_unpassed):
                batch = _SPLIT_BATCH if wrap.kind == "DataParallel" else ""
                self.report(wrap.call, kind=wrap.kind, note=f"{_ELSEWHERE}{batch})")

    def _handed_to_training(self, wraps) -> None:
        """pytorch-template's train.py wraps the model in DataParallel and hands it to a
        `Trainer` of another file that trains it; the file is left without an Accelerator
        (AM914 says why), so its wrap would go unnamed in the hand migration it asks for."""
        drives = self.ctx.config.project_drives
        if not drives or self.analysis.accelerator_names:
            return
        lines = {line: (spelling, other) for spelling, line, _col, other, *_ in drives}
        for wrap in wraps:
            target = _bound_name(wrap.statement)
            if target is None or run_by_other_files(self.analysis, wrap.call, self.ctx.config.run_callers, self.ctx.config.project_unpassed):
                continue
            for call in self.analysis.nodes("Call"):
                line = self.analysis.position(call).start.line
                if line in lines and any(cst.Module([]).code_for_node(a.value).strip() == target for a in call.args):
                    spelling, other = lines[line]
                    other = os.path.relpath(other, os.path.dirname(self.ctx.path) or ".").replace(os.sep, "/")
                    batch = _SPLIT_BATCH if wrap.kind == "DataParallel" else ""
                    note = (
                        f" (left as written: the model goes to `{spelling}` of {other}, which trains it, and this file "
                        "gets no Accelerator; in the hand migration, remove the wrap and prepare the model with its "
                        f"optimizer and loaders{batch})"
                    )
                    self.report(wrap.call, kind=wrap.kind, note=note)
                    break


def _bound_name(statement: cst.CSTNode | None) -> str | None:
    """`model` of `model = nn.DataParallel(model)`."""
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
        return cst.Module([]).code_for_node(statement.targets[0].target).strip()
    return None


_ELSEWHERE = (
    f" ({RUN_CALLS_IT}, and this file gets no "
    "Accelerator; remove the wrap, and prepare the model where the run prepares it (a model it trains: a frozen "
    "one only needs `accelerator.device`)"
)
# AM917's note, for the file that holds the wrap: the run's own files may not show it
_SPLIT_BATCH = (
    "; each process then takes a whole batch where DataParallel split one across the GPUs: divide the batch "
    "size by the number of processes to keep the global batch"
)
