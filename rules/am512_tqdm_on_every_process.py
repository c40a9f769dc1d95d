"""AM512: a tqdm progress bar drawn by every process."""

from __future__ import annotations

import libcst as cst

from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule

_TQDMS = {"tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.std.tqdm", "tqdm.trange", "tqdm.auto.trange"}


class TqdmOnEveryProcess(Rule):
    """## What it does
    Adds `disable=not accelerator.is_local_main_process` to `tqdm(...)` and `trange(...)`
    progress bars that have no `disable=` yet.

    ## Why is this bad?
    Every process draws its own bar on the same terminal: N bars overwrite each other.
    With `disable=`, the first process of each machine draws it.

    ## Example
    ```python
    for batch in tqdm(train_loader, desc="train"):
        ...
    ```

    Use instead:
    ```python
    for batch in tqdm(train_loader, desc="train", disable=not accelerator.is_local_main_process):
        ...
    ```

    ## Known limits
    A bar that already passes `disable=` keeps it (a rank test there is rewritten by
    AM214). Bars that cannot reach the Accelerator are left as they are.
    """

    code = "AM512"
    name = "tqdm-on-every-process"
    message = "`{func}(...)` draws a progress bar on every process; disable it off the local main process"
    fix_title = "Add `disable=not accelerator.is_local_main_process`"
    fix = FixAvailability.ALWAYS
    examples = (
        Example(
            before=(
                "from tqdm import tqdm\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "for i in tqdm(range(3)):\n    pass\n"
            ),
            after=(
                "from tqdm import tqdm\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "for i in tqdm(range(3), disable=not accelerator.is_local_main_process):\n    pass\n"
            ),
            at=("5:10",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.migrating:
            return
        for c in analysis.facts.calls:
            if c.qualified not in _TQDMS or any(a.keyword is not None and a.keyword.value == "disable" for a in c.node.args):
                continue
            if analysis.branches.runs_only_on_main(c.node):
                continue
            accelerator = analysis.accelerator_at(c.node)
            if accelerator is None:
                continue
            flag = cst.parse_expression(f"not {accelerator}.is_local_main_process")
            arg = cst.Arg(flag, keyword=cst.Name("disable"), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
            new = c.node.with_changes(args=_appended(c.node, arg))
            func = cst.Module([]).code_for_node(c.node.func)
            self.report(c.node, edits=[replace(c.node, new)], func=func)


def _appended(call: cst.Call, arg: cst.Arg) -> list[cst.Arg]:
    """The call's arguments with `arg` last, laid out like the others: on its own line
    in a call written one argument per line."""
    args = list(call.args)
    if not args:
        return [arg]
    last = args[-1]
    if isinstance(last.comma, cst.Comma):  # a trailing comma: the new arg takes the last line's place
        if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
            between = args[-2].comma.whitespace_after
        else:
            between = call.whitespace_before_args
        args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=between))
        return [*args, arg.with_changes(comma=last.comma)]
    args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return [*args, arg]
