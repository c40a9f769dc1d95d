"""AM229: `isinstance(model, nn.DataParallel)`, false for the model prepare() wraps."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.constant_terms import LOSS_NAME
from migrator.analysis.reach import run_by_other_files
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule

_DATA_PARALLEL = {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel"}
_DISTRIBUTED = {
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.nn.DistributedDataParallel",
}


class DataParallelTypeTest(Rule):
    """## What it does
    In a script being migrated, and in code other files of the run call on every process,
    adds DistributedDataParallel to a test for DataParallel:
    `isinstance(model, nn.DataParallel)` becomes
    `isinstance(model, (nn.DataParallel, nn.parallel.DistributedDataParallel))`, spelled
    with the module the file already names.

    ## Why is this bad?
    The test guards what the code does with a wrapped model: unwrap it (`model =
    model.module`) before reading its layers, saving its weights or freezing some of them.
    On N processes prepare() wraps the model in DistributedDataParallel, which is not a
    DataParallel: the test is false, the guarded code is skipped, and what follows reads
    the wrapper (deep-person-reid's `open_specified_layers` stops on `hasattr(model,
    'classifier')`; a `state_dict()` saved there carries `module.` in every key).

    ## Example
    ```python
    if isinstance(model, nn.DataParallel):
        model = model.module
    ```

    Use instead:
    ```python
    if isinstance(model, (nn.DataParallel, nn.parallel.DistributedDataParallel)):
        model = model.module
    ```

    ## Fix safety
    A model DataParallel wraps is still unwrapped as before; only a model wrapped in
    DistributedDataParallel, which the test let through as it was, is now unwrapped too.

    ## Known limits
    Only `isinstance` with DataParallel named as a class (alone or in a tuple) is read;
    `type(model) is nn.DataParallel` is not. A DataParallel imported by its own name
    (`from torch.nn import DataParallel`) in a file that does not import torch is
    reported, not changed.
    """

    code = "AM229"
    name = "data-parallel-type-test"
    message = (
        "`isinstance(..., {cls})` is false for the model prepare() wraps (a DistributedDataParallel on N "
        "processes), so the code it guards no longer runs for it; test for DistributedDataParallel too{note}"
    )
    fix_title = "Add DistributedDataParallel to the test"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nimport torch.nn as nn\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nmodel = nn.Linear(2, 2)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\n"
                "\n\ndef inner(net):\n    return net.module if isinstance(net, nn.DataParallel) else net\n\n\n"
                "weight = inner(model).weight\n"
            ),
            after=(
                "import torch\nimport torch.nn as nn\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nmodel = nn.Linear(2, 2)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\n"
                "\n\ndef inner(net):\n    return accelerator.unwrap_model(net) if isinstance(net, (nn.DataParallel, nn.parallel.DistributedDataParallel)) else net\n\n\n"
                "weight = inner(model).weight\n"
            ),
            at=("12:42",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        config = self.ctx.config
        shared = not analysis.migrating and bool(config.run_callers)
        if not analysis.migrating and not shared:
            return
        for fact in analysis.facts.calls:
            call = fact.node
            if fact.qualified not in ("isinstance", "builtins.isinstance") and dotted_name(call.func) != "isinstance":
                continue
            if len(call.args) != 2 or shared and not run_by_other_files(analysis, call, config.run_callers, self.ctx.config.project_unpassed):
                continue
            if LOSS_NAME.search(cst.Module([]).code_for_node(call.args[0].value)):
                continue  # a criterion wrapped for DataParallel is never what prepare() wraps
            tested = call.args[1].value
            classes = list(tested.elements) if isinstance(tested, cst.Tuple) else None
            named = [e.value for e in classes] if classes is not None else [tested]
            qualified = [analysis.imports.qualify(n) or "" for n in named]
            if not any(q in _DATA_PARALLEL for q in qualified) or any(q in _DISTRIBUTED for q in qualified):
                continue
            spelled = cst.Module([]).code_for_node(named[[q in _DATA_PARALLEL for q in qualified].index(True)])
            ddp = self._spelling(named[[q in _DATA_PARALLEL for q in qualified].index(True)])
            if ddp is None:
                self.report(tested, cls=spelled, note=" (left as written: this file imports no `torch` to name it by)")
                continue
            added = cst.Element(cst.parse_expression(ddp))
            if classes is not None:
                last = classes[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                new = tested.with_changes(elements=[*classes[:-1], last, added])
            else:
                new = cst.Tuple([cst.Element(tested, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), added])
            self.report(tested, edits=[replace(tested, new)], cls=spelled, note="")

    def _spelling(self, data_parallel: cst.BaseExpression) -> str | None:
        """DistributedDataParallel spelled through the module the file names DataParallel
        by (`nn.DataParallel` → `nn.parallel.DistributedDataParallel`), or through `torch`."""
        imports = self.analysis.imports
        if isinstance(data_parallel, cst.Attribute):
            module = imports.qualify(data_parallel.value) or ""
            owner = cst.Module([]).code_for_node(data_parallel.value)
            if module == "torch.nn":
                return f"{owner}.parallel.DistributedDataParallel"
            if module == "torch.nn.parallel":
                return f"{owner}.DistributedDataParallel"
        torch = next((name for name, full in imports.aliases.items() if full == "torch" and "." not in name), None)
        return f"{torch}.nn.parallel.DistributedDataParallel" if torch else None
