"""AM515: a training loop's per-process running sum divided by the whole data set's size."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.rule import Example, Rule


class PerProcessSumOverDataset(Rule):
    """## What it does
    Reports `train_loss / len(train_loader.dataset)` (or `train_loss /= ...`) where
    `train_loss` is summed in a training loop (`train_loss += loss.item()`) over a
    prepared dataloader. Nothing is changed.

    ## Why is this bad?
    On N processes each process sums the losses of its 1/N of the batches, while
    `len(train_loader.dataset)` is the size of the whole data set: the printed average is
    about 1/N of the real one, and differs between processes. Training itself is not
    affected, which is why nothing fails and the number is simply wrong.

    ## What to do by hand
    Sum across processes before dividing:
    `train_loss = accelerator.reduce(torch.tensor(train_loss, device=accelerator.device), reduction="sum").item()`,
    or divide by what this process saw (`len(train_loader)` batches, or a sample count
    kept in the loop) and say that the number is per process.

    ## Example
    ```python
    for data, target in train_loader:
        loss = criterion(model(data), target)
        accelerator.backward(loss)
        optimizer.step()
        train_loss += loss.item()
    print(train_loss / len(train_loader.dataset))
    ```

    Use instead:
    ```python
    train_loss = accelerator.reduce(torch.tensor(train_loss, device=accelerator.device), reduction="sum").item()
    print(train_loss / len(train_loader.dataset))
    ```

    ## See also
    - AM513 (ungathered-metrics): the same question in evaluation loops, where the
      migration gathers the values instead.
    """

    code = "AM515"
    name = "per-process-sum-over-dataset"
    message = (
        "`{total}` sums this process's share of `{loader}` but is divided by the whole data set's size: "
        "on N processes this is about 1/N of the average; sum it across processes first (`accelerator.reduce`)"
    )
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "loader = torch.utils.data.DataLoader(torch.zeros(8, 2), batch_size=2)\n"
                "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
                "total = 0.0\nfor x in loader:\n    loss = model(x).sum()\n    accelerator.backward(loss)\n"
                "    optimizer.step()\n    total += loss.item()\nprint(total / len(loader.dataset))\n"
            ),
            at=("15:7",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.migrating:
            return
        facts = analysis.facts
        training = {id(loop) for c in facts.calls if _is_backward(c.node) for loop in c.loops}
        prepared = analysis.prepared
        for loop in facts.loops:
            name = loop.iter_name
            if id(loop.node) not in training or name is None:
                continue
            from_param = isinstance(loop.scope, cst.FunctionDef) and name in facts.params.get(id(loop.scope), ())
            if name not in prepared and not from_param:
                continue
            sums = _running_sums(loop.node)
            if sums:
                self._check_divisions(loop, name, sums)

    def _check_divisions(self, loop, loader: str, sums: set[str]) -> None:
        analysis = self.analysis
        end = analysis.order(loop.node)
        for division in analysis.nodes("BinaryOperation") + analysis.nodes("AugAssign"):
            if analysis.scope_of(division) is not loop.scope or analysis.order(division) < end:
                continue
            if loop.node in _ancestors(analysis, division):
                continue  # a progress line inside the loop divides something else
            if isinstance(division, cst.BinaryOperation) and isinstance(division.operator, cst.Divide):
                left, right = division.left, division.right
            elif isinstance(division, cst.AugAssign) and isinstance(division.operator, cst.DivideAssign):
                left, right = division.target, division.value
            else:
                continue
            total = dotted_name(left)
            if total in sums and _dataset_size_of(right) == loader:
                self.report(division, total=total, loader=loader)


def _is_backward(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward"


def _running_sums(loop: cst.For) -> set[str]:
    """Names the loop adds a value to (`train_loss += loss.item()`), not counters (`+= 1`)."""
    sums: set[str] = set()

    class _Find(cst.CSTVisitor):
        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.operator, cst.AddAssign) and not isinstance(node.value, (cst.Integer, cst.Float)):
                name = dotted_name(node.target)
                if name is not None:
                    sums.add(name)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    loop.body.visit(_Find())
    return sums


def _dataset_size_of(expr: cst.BaseExpression) -> str | None:
    """`train_loader` for `len(train_loader.dataset)`."""
    if isinstance(expr, cst.Call) and dotted_name(expr.func) == "len" and len(expr.args) == 1:
        inner = expr.args[0].value
        if isinstance(inner, cst.Attribute) and inner.attr.value == "dataset":
            return dotted_name(inner.value)
    return None


def _ancestors(analysis, node: cst.CSTNode):
    current = analysis.parent(node)
    while current is not None:
        yield current
        current = analysis.parent(current)
