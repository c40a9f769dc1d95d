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
    instead, as run_glue_no_trainer does. Three shapes get more care:

    - a 0-d loss bound in the loop (`loss = criterion(logits, y)`, `loss = outputs.loss`)
      is reduced where it is computed, `loss = accelerator.reduce(loss, reduction="mean")`
      (`"sum"` when the criterion sums): gathering it would give N numbers;
    - references read from a batch dict are gathered alone, with the predictions:
      `predictions, labels = accelerator.gather_for_metrics((predictions, batch["labels"]))`,
      and the metric reads `labels`;
    - when the loop uses a gathered value again with this process's shape
      (`recon.view(args.batch_size, ...)`), the values are gathered into new names
      (`all_recon`) that only the metric reads, or, when the metric reads a value
      computed from them (`pred = out.argmax(1)`), that value is gathered instead.

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
    them between processes too. A reduced loss counts the samples the last batch repeats
    to even out the processes (`gather_for_metrics` drops them; `reduce` cannot). Loops
    where a metric is counted under a condition, reads two keys of a batch dict, or reads
    a loss already turned into a Python number are reported by AM514 and left as they are.
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
        after: dict[int, tuple[cst.CSTNode, list[cst.SimpleStatementLine]]] = {}
        for name, reduction, bound in gather.reductions:  # a 0-d loss: one number for all processes
            code = f'{name} = {accelerator}.reduce({name}, reduction="{reduction}")\n'
            after.setdefault(id(bound), (bound, []))[1].append(cst.parse_statement(code))  # type: ignore[arg-type]
        if gather.names:
            statement = _gather_statement(accelerator, list(gather.names), list(gather.values or gather.names))
            if gather.after is not None:
                after.setdefault(id(gather.after), (gather.after, []))[1].append(statement)
            else:
                edits.append(insert_before(gather.loop.body.body[0], statement))  # type: ignore[attr-defined]
        edits += [insert_after(anchor, *statements) for anchor, statements in after.values()]
        renames = dict(gather.renames)
        keyword_calls = {id(a.call) for a in gather.arg_gathers}
        for small in gather.statements if renames else ():
            if isinstance(small, cst.Expr) and id(small.value) in keyword_calls:
                continue
            renamed = small.visit(_Rename(renames))
            if not renamed.deep_equals(small):
                edits.append(replace(small, renamed))
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


class _Rename(cst.CSTTransformer):
    """Reads of the gathered values under their new names: `batch["labels"]` -> `labels`,
    `recon_batch` -> `all_recon_batch` (attribute names and keywords stay)."""

    def __init__(self, renames: dict[str, str]) -> None:
        super().__init__()
        self.renames = renames

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        new = self.renames.get(cst.Module([]).code_for_node(original))
        return cst.Name(new) if new is not None else updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        new = self.renames.get(original.value)
        return cst.Name(new) if new is not None else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def _gather_statement(accelerator: str, names: list[str], values: list[str]) -> cst.SimpleStatementLine:
    if len(names) == 1:
        code = f"{names[0]} = {accelerator}.gather_for_metrics({values[0]})"
    else:
        code = f"{', '.join(names)} = {accelerator}.gather_for_metrics(({', '.join(values)}))"
    statement = cst.parse_statement(code + "\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    return statement
