"""AM225: a ReduceLROnPlateau stepped with a metric each process computed on its own."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.reach import unreachable_note
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule

_PLATEAU = "torch.optim.lr_scheduler.ReduceLROnPlateau"


class PlateauSchedulerMetric(Rule):
    """## What it does
    Averages the metric given to a `ReduceLROnPlateau`'s `step(metric)` over the
    processes: `scheduler.step(val_loss)` becomes
    `scheduler.step(accelerator.reduce(torch.tensor(float(val_loss), dtype=torch.float64,
    device=accelerator.device), reduction="mean").item())`. The scheduler itself is kept
    out of `prepare()` (it follows a metric, not the batches: prepared, it would step once
    per process for each metric).

    ## Why is this bad?
    Each process evaluates its own share of the validation data, so each gets its own
    metric. A plateau scheduler fed those lowers the learning rate on some processes and
    not on others; DDP keeps the gradients in step but the optimizers then apply them at
    different rates, and the copies of the model drift apart with no error. Averaged, the
    metric is one number every process sees, so the schedulers agree. A metric that was
    already the same everywhere (gathered, or computed on data every process reads
    whole) is unchanged by the average.

    ## Example
    ```python
    val_loss = evaluate(model, val_loader)
    scheduler.step(val_loss)
    ```

    Use instead:
    ```python
    val_loss = evaluate(model, val_loader)
    scheduler.step(accelerator.reduce(torch.tensor(float(val_loss), dtype=torch.float64, device=accelerator.device), reduction="mean").item())
    ```

    ## Fix safety
    On one process the average is the metric itself (a float64 holds any float and
    float32 exactly), so training is unchanged. The reduction is a collective: it is
    written only where every process steps the scheduler (not under a rank test) and
    the Accelerator reaches the call.

    ## Known limits
    Only a scheduler built in the file, with `ReduceLROnPlateau` resolved through the
    imports, is recognised; a metric passed by keyword other than `metrics=` and a step
    under a main-process test are reported and left as written.
    """

    code = "AM225"
    name = "plateau-scheduler-metric"
    message = "`{name}.step(...)` follows a metric each process computes on its own share of the data{note}"
    fix_title = "Average the metric over the processes"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)\nsched.step(val_loss)\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)\n"
                "sched.step(accelerator.reduce(torch.tensor(float(val_loss), dtype=torch.float64, "
                "device=accelerator.device), reduction=\"mean\").item())\n"
            ),
            at=("6:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.migrating:
            return
        plateaus = {
            b.name for b in analysis.facts.bindings
            if isinstance(b.value, cst.Call) and analysis.imports.qualify(b.value.func) == _PLATEAU
        }
        if not plateaus:
            return
        torch = analysis.top_level_name("torch")
        for c in analysis.facts.calls:
            func = c.node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "step" and c.func is not None):
                continue
            name = c.func.rpartition(".")[0]
            if name not in plateaus:
                continue
            self._step(c.node, name, torch)

    def _step(self, call: cst.Call, name: str, torch: str | None) -> None:
        analysis = self.analysis
        metric = _metric_arg(call)
        if metric is None:
            return  # `scheduler.step()` with no metric: nothing to average
        reach = analysis.accelerator_at(call)
        if reach is not None and _averaged(metric.value, reach):
            return  # already the same on every process
        if reach is None:
            self.report(call, name=name, note=unreachable_note(analysis, call) or "; average it over the processes first")
            return
        if analysis.branches.branch_of(call) is not None or analysis.branches.runs_only_on_main(call):
            self.report(call, name=name, note=" (left as written: it steps on the main process only; step it on every process with the averaged metric)")
            return
        if torch is None:
            self.report(call, name=name, note=" (left as written: `torch` is not imported here; average it with `accelerator.reduce` by hand)")
            return
        value = cst.Module([]).code_for_node(metric.value)
        averaged = cst.parse_expression(
            f"{reach}.reduce({torch}.tensor(float({value}), dtype={torch}.float64, device={reach}.device), "
            f'reduction="mean").item()'
        )
        self.report(call, edits=[replace(metric.value, averaged)], name=name, note="")


def _metric_arg(call: cst.Call) -> cst.Arg | None:
    for i, arg in enumerate(call.args):
        keyword = arg.keyword.value if arg.keyword is not None else None
        if (keyword is None and i == 0) or keyword == "metrics":
            return arg
    return None


def _averaged(value: cst.BaseExpression, reach: str) -> bool:
    """`accelerator.reduce(...).item()` (or a reduce/gather result) given as the metric."""
    code = cst.Module([]).code_for_node(value)
    return code.startswith((f"{reach}.reduce(", f"{reach}.gather("))
