"""AM522: a running meter (AverageMeter) filled over a prepared loader holds one process's share."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.meters import why_left
from migrator.analysis.metric_shapes import fresh_name, names_of_scope
from migrator.edits import Fix, ImportChange, insert_after
from migrator.rule import Example, FixAvailability, Rule

_SETUP = (
    "import torch\nfrom runtime import Accelerator\n\n\nclass AverageMeter:\n"
    "    def __init__(self):\n        self.sum, self.count, self.avg = 0.0, 0, 0.0\n\n"
    "    def update(self, val, n=1):\n        self.sum += val * n\n        self.count += n\n"
    "        self.avg = self.sum / self.count\n\n\n"
    "accelerator = Accelerator()\nmodel = torch.nn.Linear(2, 1)\n"
    "loader = torch.utils.data.DataLoader(torch.zeros(8, 2), batch_size=2)\n"
    "model, loader = accelerator.prepare(model, loader)\nlosses = AverageMeter()\n"
    "for x in loader:\n    losses.update(model(x).sum().item(), x.size(0))\n"
)


class RunningMeterPerProcess(Rule):
    """## What it does
    Finds running meters (`losses = AverageMeter()`, updated with
    `losses.update(loss.item(), images.size(0))` per batch) filled in a loop over a
    prepared dataloader, and adds their sums and counts up across processes right after
    the loop, recomputing the average, so `losses.avg` is the epoch's figure on every
    process. A meter class qualifies when its `update` adds to `self.sum` and
    `self.count` and sets `self.avg = self.sum / self.count` (the ImageNet example's),
    whether it is written in the file or in another file of the run.

    ## Why is this bad?
    Each process's meter averages its own 1/N of the data. The figure printed is one
    process's, and where it decides something (the best checkpoint, `ReduceLROnPlateau`,
    an early stop) the processes disagree: one stops or steps while another does not, and
    the next collective hangs.

    ## Example
    ```python
    losses = AverageMeter()
    for images, target in val_loader:
        loss = criterion(model(images), target)
        losses.update(loss.item(), images.size(0))
    return losses.avg
    ```

    Use instead:
    ```python
    losses = AverageMeter()
    for images, target in val_loader:
        loss = criterion(model(images), target)
        losses.update(loss.item(), images.size(0))
    for meter in (losses,):
        meter.sum, meter.count = accelerator.reduce(torch.tensor([float(meter.sum), float(meter.count)], dtype=torch.float64, device=accelerator.device), reduction="sum").tolist()
        meter.avg = meter.sum / meter.count if meter.count else meter.avg
    return losses.avg
    ```

    ## Fix safety
    The sums are added where every process has finished the loop: right after it, at the
    loop's own level. The running values printed inside the loop stay each process's (the
    main process prints its own progress). `val` (the last batch's value) is not touched.

    ## Known limits
    Left as a finding: a loop with a `return` inside or under a branch some processes skip.
    Not touched: a meter of a class whose bookkeeping cannot be read (imported from outside
    the run), a meter updated in more than one loop, and clocks (`batch_time`). In a function
    no Accelerator reaches, AM913 names the meters instead. When the data set does not divide evenly,
    the prepared loader repeats a few samples in the last batch, and the sums count them.

    ## See also
    - AM514 (ungatherable-metrics): what the evaluation loop's other metrics need.
    - AM515 (per-process-sum-over-dataset): the same for a plain running sum.
    """

    code = "AM522"
    name = "running-meter-per-process"
    message = "{meters} average this process's share of the data only: add their sums and counts up across processes after the loop (`accelerator.reduce`){note}"
    fix_title = "Add the meters' sums and counts up across processes after the loop"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=_SETUP + "print(losses.avg)\n",
            after=_SETUP + (
                "for meter in (losses,):\n"
                '    meter.sum, meter.count = accelerator.reduce(torch.tensor([float(meter.sum), float(meter.count)], dtype=torch.float64, device=accelerator.device), reduction="sum").tolist()\n'
                "    meter.avg = meter.sum / meter.count if meter.count else meter.avg\n"
                "accelerator.print(losses.avg)\n"
            ),
            at=("21:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        for sync in (s for s in analysis.patterns.meters if not s.done):
            meters = ", ".join(f"`{n}`" for n in sync.names)
            anchor = sync.updates[0]
            if analysis.accelerator_at(sync.loop) is None:
                continue  # a function no Accelerator reaches: AM913 names its meters (analysis/unreached.py)
            why = why_left(sync, analysis.branches)
            if why is not None:
                self.report(anchor, meters=meters, note=f" (left as written: {why})")
                continue
            accelerator = analysis.accelerator_at(sync.loop)
            imports: list[ImportChange] = []
            torch = analysis.top_level_name("torch")
            if torch is None:
                torch, imports = "torch", [ImportChange("torch")]
            meter = fresh_name("meter", names_of_scope(analysis.facts, analysis.scope_of(sync.loop)))
            code = (
                f"for {meter} in ({', '.join(sync.names)}{',' if len(sync.names) == 1 else ''}):\n"
                f"    {meter}.sum, {meter}.count = {accelerator}.reduce({torch}.tensor([float({meter}.sum), float({meter}.count)], "
                f'dtype={torch}.float64, device={accelerator}.device), reduction="sum").tolist()\n'
                f"    {meter}.avg = {meter}.sum / {meter}.count if {meter}.count else {meter}.avg\n"
            )
            fix = Fix((insert_after(sync.loop, cst.parse_statement(code)),), tuple(imports))
            self.report(anchor, edits=fix, meters=meters, note="")
