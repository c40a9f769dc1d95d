"""AM514: evaluation metrics counted per process, in a shape the migrator leaves alone."""

from __future__ import annotations

import libcst as cst

from migrator.rule import Example, Rule


class UngatherableMetrics(Rule):
    """## What it does
    Reports evaluation loops over a prepared dataloader whose metrics count only this
    process's share of the data, where AM513 cannot place the gather: a metric counted
    under a condition or in a nested loop, a metric reading several keys of a batch dict
    (`batch["labels"]` and `batch["alt"]`: gathering the whole batch would move inputs of
    different lengths), a metric counted before the model output it needs, a loss read
    as a Python number (`loss = criterion(out, y).item()`: only a tensor can be reduced),
    or a count computed in the loop (`hits = (pred == y).sum()`) from an output the loop
    uses again with this process's shape.

    ## Why is this bad?
    On N processes the metric covers 1/N of the samples (and differs between processes).

    ## What to do by hand
    Gather the per-sample predictions and labels first, then count:
    `preds, labels = accelerator.gather_for_metrics((preds, batch["labels"]))`. For
    sequences of different lengths, pad first with `accelerator.pad_across_processes`.

    ## Example
    ```python
    for batch in eval_loader:
        preds = model(**batch).logits.argmax(-1)
        correct += (preds == batch["labels"]).sum().item()
    ```

    Use instead:
    ```python
    for batch in eval_loader:
        preds = model(**batch).logits.argmax(-1)
        preds, labels = accelerator.gather_for_metrics((preds, batch["labels"]))
        correct += (preds == labels).sum().item()
    ```
    """

    code = "AM514"
    name = "ungatherable-metrics"
    message = "{metrics} only this process's share of the evaluation data (left as written: {reason})"
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nloader = torch.utils.data.DataLoader(torch.zeros(4, 2))\n"
                "model, loader = accelerator.prepare(model, loader)\ncorrect = 0\n"
                "for x in loader:\n    output = model(x)\n    if output.sum() > 0:\n"
                "        correct += (output.argmax(1) == 0).sum().item()\n"
            ),
            at=("12:9",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        for gather in analysis.patterns.metrics:
            if gather.reason is None:
                continue
            self.report(gather.anchor, metrics=_counted(gather.statements), reason=gather.reason)


def _counted(statements) -> str:
    """`acc += ...` counts; `acc += ...`, `SE += ...` and 6 more count (every metric of the
    loop is named, not the first alone: LeeJunHyun's eight sums, reader R3)."""
    shown = []
    for statement in statements:
        code = cst.Module([]).code_for_node(statement).strip()
        code = code.split("+=")[0].strip() + " += ..." if "+=" in code else code.split("(")[0] + "(...)"
        if code not in shown:
            shown.append(code)
    named = ", ".join(f"`{s}`" for s in shown[:3])
    if len(shown) > 3:
        named += f" and {len(shown) - 3} more"
    return f"{named} count" if len(shown) > 1 else f"{named} counts"
