"""AM513: evaluation metrics counted on each process's share of the data."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.metrics import MetricsGather
from migrator.edits import Edit, Fix, insert_after, insert_before, replace
from migrator.rule import Example, FixAvailability, Rule


class UngatheredMetrics(Rule):
    """## What it does
    In an evaluation loop over a prepared dataloader, gathers what the metrics are
    computed from before anything is counted: the model outputs and batch tensors
    (`output, target = accelerator.gather_for_metrics((output, target))`, right after
    the model call), so `pred = output.argmax(1)`, `correct += ...`, `total += ...` and
    `test_loss += ...` cover every process's samples. A Hugging Face
    `metric.add_batch(predictions=..., references=...)` gets its arguments gathered
    instead, as run_glue_no_trainer does.

    ## Why is this bad?
    Each process evaluates 1/N of the data, so a count (`correct`) covers 1/N of the
    samples while it is divided by the size of the whole dataset: the accuracy printed
    on N processes is about 1/N of the real one, and differs between processes.
    `gather_for_metrics` also drops the samples the last batch repeats to even out the
    processes.

    ## Example
    ```python
    for data, target in test_loader:
        output = model(data)
        pred = output.argmax(dim=1)
        correct += (pred == target).sum().item()
    ```

    Use instead:
    ```python
    for data, target in test_loader:
        output = model(data)
        output, target = accelerator.gather_for_metrics((output, target))
        pred = output.argmax(dim=1)
        correct += (pred == target).sum().item()
    ```

    ## Known limits
    Gathering the batch's inputs (when a metric reads them, e.g. `images.size(0)`) moves
    them between processes too. Loops where a metric is counted under a condition, or
    reads `batch["labels"]` directly, are reported by AM514 and left as they are.
    """

    code = "AM513"
    name = "ungathered-metrics"
    message = "`{metric}` counts only this process's share of the evaluation data; gather first"
    fix_title = "Gather with `accelerator.gather_for_metrics` before counting"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nloader = torch.utils.data.DataLoader(torch.zeros(4, 2))\n"
                "model, loader = accelerator.prepare(model, loader)\ncorrect = 0\n"
                "for x in loader:\n    output = model(x)\n    correct += (output.argmax(1) == 0).sum().item()\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nloader = torch.utils.data.DataLoader(torch.zeros(4, 2))\n"
                "model, loader = accelerator.prepare(model, loader)\ncorrect = 0\n"
                "for x in loader:\n    output = model(x)\n    output = accelerator.gather_for_metrics(output)\n"
                "    correct += (output.argmax(1) == 0).sum().item()\n"
            ),
            at=("11:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        for gather in analysis.patterns.metrics:
            if gather.reason is not None:
                continue
            accelerator = analysis.accelerator_at(gather.loop.body)
            fix = Fix(tuple(self._edits(gather, accelerator))) if accelerator is not None else None
            for statement in gather.statements:
                shown = cst.Module([]).code_for_node(statement).strip()
                shown = shown.split("+=")[0].strip() + " += ..." if "+=" in shown else shown.split("(")[0] + "(...)"
                self.report(statement, edits=fix, metric=shown)

    def _edits(self, gather: MetricsGather, accelerator: str) -> list[Edit]:
        edits: list[Edit] = []
        if gather.names:
            statement = _gather_statement(accelerator, list(gather.names), list(gather.names))
            if gather.after is not None:
                edits.append(insert_after(gather.after, statement))
            else:
                edits.append(insert_before(gather.loop.body.body[0], statement))  # type: ignore[attr-defined]
        for arg_gather in gather.arg_gathers:
            names = [name for name, _ in arg_gather.args]
            values = [cst.Module([]).code_for_node(arg.value).strip() for _, arg in arg_gather.args]
            edits.append(insert_before(arg_gather.statement, _gather_statement(accelerator, names, values)))
            new_args = [
                arg if values[i] == name else arg.with_changes(value=cst.Name(name))
                for i, (name, arg) in enumerate(arg_gather.args)
            ]
            if any(a is not b for a, b in zip(new_args, (arg for _, arg in arg_gather.args))):
                edits.append(replace(arg_gather.call, arg_gather.call.with_changes(args=new_args)))
        return edits


def _gather_statement(accelerator: str, names: list[str], values: list[str]) -> cst.SimpleStatementLine:
    if len(names) == 1:
        code = f"{names[0]} = {accelerator}.gather_for_metrics({values[0]})"
    else:
        code = f"{', '.join(names)} = {accelerator}.gather_for_metrics(({', '.join(values)}))"
    statement = cst.parse_statement(code + "\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    return statement
