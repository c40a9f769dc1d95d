"""AM524: a metric object fed the model's outputs in a training loop sees one process's batches."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.loop import backward_loops
from migrator.analysis.metric_loop import EvalLoop, is_model_call
from migrator.analysis.metrics import sharded_loop
from migrator.rule import Example, Rule

# What a metric object is fed with (lists, `append`/`extend`, are AM515's; meters with a
# sum and a count, AM522's)
_FEEDS = {"add", "update", "add_batch", "add_batches"}


class TrainingMetricPerProcess(Rule):
    """## What it does
    Finds a metric object fed the model's outputs batch by batch in a training loop over
    a prepared dataloader (`self.metric.add(outputs.detach(), labels.detach())`, an IoU
    or accuracy object whose `value()` is the epoch's training figure) and says that it
    now sees this process's batches only. It rewrites nothing.

    ## Why is this bad?
    On N processes each process trains on its 1/N of the batches, so the metric's value
    is one process's figure, printed or logged as if it were the epoch's, and it differs
    between processes. Gathering the outputs for it (`accelerator.gather_for_metrics`)
    costs a collective on every training step, which the migration does not add on its
    own: gather them where the figure matters, or compute it in an evaluation pass over
    the data. Running meters with a sum and a count (AM522) and running sums (AM515) are
    reduced after the loop instead.

    ## Example
    ```python
    for images, labels in train_loader:
        outputs = model(images)
        loss = criterion(outputs, labels)
        accelerator.backward(loss)
        optimizer.step()
        metric.add(outputs.detach(), labels)
    print(metric.value())
    ```

    Use instead:
    ```python
    for images, labels in train_loader:
        outputs = model(images)
        loss = criterion(outputs, labels)
        accelerator.backward(loss)
        optimizer.step()
        all_outputs, all_labels = accelerator.gather_for_metrics((outputs.detach(), labels))
        metric.add(all_outputs, all_labels)  # a collective per step: where the figure is worth it
    print(metric.value())
    ```
    """

    code = "AM524"
    name = "training-metric-per-process"
    message = (
        "`{call}(...)` feeds `{owner}` this process's share of the training batches: on N processes its "
        "value is this process's figure, not the epoch's; gather what it is fed "
        "(`accelerator.gather_for_metrics`, a collective per step) or compute it in an evaluation pass"
    )
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "loader = torch.utils.data.DataLoader(torch.zeros(8, 2), batch_size=2)\n"
                "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
                "for x in loader:\n    outputs = model(x)\n    accelerator.backward(outputs.sum())\n"
                "    optimizer.step()\n    metric.add(outputs.detach(), x)\n"
            ),
            at=("13:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None:
            return
        facts = analysis.facts
        training = backward_loops(facts)
        meters = {id(c) for m in analysis.patterns.meters for c in m.updates}
        prepared = analysis.prepared
        for fact in facts.loops:
            if id(fact.node) not in training or not sharded_loop(fact, facts, analysis.roles, prepared):
                continue
            loop = EvalLoop(fact, facts, analysis.roles)
            outputs = _model_outputs(loop)
            for statement, direct in loop.lines:
                if not direct or not isinstance(statement, cst.SimpleStatementLine):
                    continue
                for small in statement.body:
                    call = small.value if isinstance(small, cst.Expr) else None
                    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)) or id(call) in meters:
                        continue
                    owner = cst.Module([]).code_for_node(call.func.value)
                    if call.func.attr.value not in _FEEDS or owner.split(".")[0] in loop.bound:
                        continue
                    if any(_is_output(a.value, outputs) for a in call.args):
                        self.report(call, call=f"{owner}.{call.func.attr.value}", owner=owner)


def _model_outputs(loop: EvalLoop) -> set[str]:
    """Names the loop binds to the model's outputs themselves (`outputs = model(x)`)."""
    return {name for name, (_, value, _) in loop.bound.items() if value is not None and is_model_call(value, loop.models)}


def _is_output(expr: cst.BaseExpression, outputs: set[str]) -> bool:
    """`outputs`, `outputs.detach()`, `outputs.argmax(dim=1)`: the batch of outputs, not a
    number computed from it (`loss.item()` into a running meter is AM522's and AM515's)."""
    while isinstance(expr, (cst.Call, cst.Attribute)):
        if isinstance(expr, cst.Call):
            if not isinstance(expr.func, cst.Attribute) or expr.func.attr.value in ("item", "tolist", "sum", "mean"):
                return False
            expr = expr.func.value
        else:
            expr = expr.value
    return isinstance(expr, cst.Name) and expr.value in outputs
