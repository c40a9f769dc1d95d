"""AM219: another file's distribution set-up helper, or its save_on_master, called by hand."""

from __future__ import annotations

import libcst as cst

from migrator.cst import attr_call
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule

# How an attribute the set-up helper set reads once the Accelerator places the process.
_VALUES = {
    "process_index": "{acc}.process_index",
    "num_processes": "{acc}.num_processes",
    "local_process_index": "{acc}.local_process_index",
    "distributed": "{acc}.num_processes > 1",
}


class DistributionHelperOfAnotherFile(Rule):
    """## What it does
    In a run of several files, replaces the call of another file's set-up helper
    (`utils.init_distributed_mode(args)`, whose body reads the launcher's variables,
    joins the process group and records what it found on `args`) by the attributes it
    set, each read from the Accelerator: `args.distributed = accelerator.num_processes >
    1`, `args.gpu = accelerator.local_process_index`, ... (those another file of the run
    reads). Where the helper silenced `print` on the other processes
    (`setup_for_distributed(args.rank == 0)`), the migrated call does the same with
    `accelerator.is_main_process`. `utils.save_on_master(obj, path)` becomes
    `accelerator.save(obj, path)`. A helper that hands back the model it is given wrapped
    in `nn.DataParallel` or DDP (`model, device = model_device(n_gpu, model)`) is named at
    its call, and the file is left as written until the call goes. (`utils.get_rank()`, `utils.get_world_size()` and
    `utils.is_main_process()` become the Accelerator's properties: AM217.)

    ## Why is this bad?
    The Accelerator joins the process group itself: the helper would join it a second
    time ("trying to initialize the default process group twice"), and the DDP wrap and
    samplers it steers are prepare()'s now. The helper's module stays as it is (other
    scripts may use it); only the calls change.

    ## Example
    ```python
    def main(args):
        utils.init_distributed_mode(args)
        ...
        utils.save_on_master(model_without_ddp.state_dict(), "checkpoint.pth")
    ```

    Use instead:
    ```python
    def main(args):
        accelerator = Accelerator()
        args.distributed = accelerator.num_processes > 1
        args.gpu = accelerator.local_process_index
        utils.setup_for_distributed(accelerator.is_main_process)
        ...
        accelerator.save(model_without_ddp.state_dict(), "checkpoint.pth")
    ```

    ## Known limits
    Only in a run that holds both files (`accel-migrate DIR`): the helper's body says what
    it does. A helper that sets an attribute whose meaning cannot be read from it (and
    that another file reads) stays, and the migration is refused (AM955) rather than
    guessed. Run alone, the caller keeps the call and is refused the same way.
    """

    code = "AM219"
    name = "distribution-helper-of-another-file"
    message = "`{call}` {what}; {advice}"
    fix_title = "Read what the helper set from the Accelerator"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nimport utils\n\n\ndef main(args):\n    utils.init_distributed_mode(args)\n"
                "    model = torch.nn.Linear(2, 2).cuda(args.gpu)\n"
                "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "    loader = torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=4)\n"
                "    for x in loader:\n        model(x.cuda()).sum().backward()\n        optimizer.step()\n"
                "    utils.save_on_master(model.state_dict(), 'last.pt')\n"
            ),
            after=(
                "import torch\nimport utils\nfrom runtime import Accelerator\n\n\ndef main(args):\n"
                "    accelerator = Accelerator()\n"
                "    utils.setup_for_distributed(accelerator.is_main_process)\n"
                "    model = torch.nn.Linear(2, 2)\n"
                "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "    loader = torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=4)\n"
                "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
                "    for x in loader:\n        accelerator.backward(model(x).sum())\n        optimizer.step()\n"
                "    accelerator.save(accelerator.unwrap_model(model).state_dict(), 'last.pt')\n"
            ),
            at=("6:5", "13:5"),
            project_distribution=(
                ("utils.init_distributed_mode", "setup", (("gpu", "local_process_index", False),), "utils.setup_for_distributed"),
                ("utils.save_on_master", "save_on_master", (), ""),
            ),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        for call in analysis.patterns.distribution.wrap_helper_calls:
            self.report(
                call, call=f"{cst.Module([]).code_for_node(call.func)}(...)",
                what="is another file's helper that wraps the model it is handed in DataParallel or DDP",
                advice=(
                    "accelerator.prepare() wraps the model for this process, so a second wrap would nest in it "
                    "(left as written): drop the call, take the device it chose from `accelerator.device`, "
                    "and hand the model to prepare(); its wrap also moved every batch onto the GPU in the forward, "
                    "which prepare() does only for prepared loaders: batches of one left out of prepare() (an "
                    "inference loader, one handed to another file's code) then need `.to(accelerator.device)` "
                    "where they are used"
                ),
            )
        for helper in analysis.patterns.distribution.helper_calls:
            shown = f"{cst.Module([]).code_for_node(helper.call.func)}(...)"
            accelerator = analysis.accelerator_at(helper.call)
            if helper.kind == "save_on_master":
                fields = {"call": shown, "what": "saves on the main process by hand", "advice": "use `accelerator.save(...)`"}
                if accelerator is None:
                    self.report(helper.call, **fields, advice="use `accelerator.save(...)` (left as written: the Accelerator cannot be reached from here)")
                    continue
                self.report(helper.call, edits=[replace(helper.call, attr_call(accelerator, "save", helper.call.args))], **fields)
                continue
            fields = {
                "call": shown, "what": "joins the process group by hand",
                "advice": "the Accelerator joins it; what the helper set is read from the Accelerator",
            }
            argument = helper.call.args[0].value if len(helper.call.args) == 1 and not helper.call.args[0].keyword else None
            line = analysis.parent(helper.statement)
            if accelerator is None or argument is None or not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
                fields["advice"] += " (left as written: the Accelerator cannot be reached from here, or the call shares its line)"
                self.report(helper.call, **fields)
                continue
            self.report(helper.call, edits=[replace(line, _replacement(helper, argument, accelerator))], **fields)


def _replacement(helper, argument: cst.BaseExpression, accelerator: str) -> cst.CSTNode:
    holder = cst.Module([]).code_for_node(argument)
    lines = [f"{holder}.{attribute} = {_VALUES[meaning].format(acc=accelerator)}" for attribute, meaning in helper.attributes]
    if helper.prints:
        lines.append(f"{helper.prints}({accelerator}.is_main_process)")
    if not lines:
        return cst.RemovalSentinel.REMOVE
    return cst.FlattenSentinel([cst.parse_statement(line) for line in lines])
