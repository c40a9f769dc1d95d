"""AM217: rank and world size read by hand (`LOCAL_RANK`, `dist.get_rank()`)."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.flag_branches import FlagBranch, flag_branches, same_flag_choices
from migrator.edits import remove, replace
from migrator.rule import Example, FixAvailability, Rule

_UNREACHED = " (left as written: the Accelerator cannot be reached from here)"
# ... and the process group it asks is made by the Accelerator only later, in a function called after it
_NO_GROUP_YET = (
    " (left as written: the Accelerator cannot be reached from here, and it makes the process group only in"
    " `{creator}()`, called after this: here the group does not exist yet, so this reads no process's rank (0 on"
    " every process from a helper that tests for the group, an error from `dist.get_rank()`); create the"
    " Accelerator before it and pass it on, or read the launcher's `int(os.environ.get(\"RANK\", 0))`)"
)


class RankPlumbing(Rule):
    """## What it does
    Replaces reads of the process's place in the run with the Accelerator's:
    `int(os.environ["LOCAL_RANK"])` → `accelerator.local_process_index`,
    `int(os.environ["RANK"])` and `dist.get_rank()` → `accelerator.process_index`,
    `int(os.environ["WORLD_SIZE"])` and `dist.get_world_size()` →
    `accelerator.num_processes`. A variable holding one of them that nothing reads any
    more (its uses were `set_device`, DDP's `device_ids`, rank tests) goes. The device
    spelled from the local rank for `torch.load(..., map_location=f"cuda:{local_rank}")`
    becomes `accelerator.device`.

    ## Why is this bad?
    The environment variables exist only under a launcher and `dist.get_rank()` needs a
    process group: the script fails when run as a single process. The Accelerator's
    properties work everywhere (0 and 1 on one process).

    ## Example
    ```python
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = dist.get_world_size()
    print(f"{world_size} processes")
    ```

    Use instead:
    ```python
    world_size = accelerator.num_processes
    print(f"{world_size} processes")
    ```

    ## Known limits
    A test of whether a launcher started the script (`int(os.environ.get("RANK", -1)) !=
    -1`, `"RANK" in os.environ`) becomes `accelerator.num_processes > 1`, and an
    `if ddp: ... else: ...` on it whose first branch, once it reads the Accelerator,
    binds on one process what the else binds keeps that branch alone
    (analysis/flag_branches.py); otherwise both branches stay, each correct.

    `--local_rank` command-line arguments stay declared (the old launcher passed them);
    reads of `args.local_rank` are rewritten where they test for the main process
    (AM214) and reported by the rule that uses them otherwise. Reads where the
    Accelerator cannot be reached (module level above `main()`) are reported; one that
    asks torch.distributed in a function that creates the Accelerator only later, in a
    function it calls after the read (`setup_logger(dist_util.get_rank())` in `main()`,
    then `train()`), is reported with that: the `init_process_group` that ran first is
    gone, so the read sees no group yet.
    """

    code = "AM217"
    name = "rank-plumbing"
    message = "`{read}` reads the process's rank or count by hand; {advice}"
    fix_title = "Use the Accelerator's process index and count"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import os\nimport torch.distributed as dist\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nlocal_rank = int(os.environ[\"LOCAL_RANK\"])\n"
                "world_size = dist.get_world_size()\nprint(world_size)\n"
            ),
            after=(
                "from runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nworld_size = accelerator.num_processes\naccelerator.print(world_size)\n"
            ),
            at=("6:14", "7:14"),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        facts = analysis.patterns.distribution
        for read in facts.plumbing:
            shown = cst.Module([]).code_for_node(read.node).strip()
            fields = {"read": shown, "advice": f"use `accelerator.{read.prop}`"}
            if read.statement is not None:
                target = cst.Module([]).code_for_node(read.statement.targets[0].target).strip()  # type: ignore[attr-defined]
                if shown.startswith(("accelerator.", "self.accelerator.")):
                    fields["read"] = target
                fields["advice"] = f"nothing reads `{target}` once the Accelerator places the process"
                self.report(read.node, edits=facts.removal(read.statement), **fields)
                continue
            accelerator = analysis.accelerator_at(read.node)
            if accelerator is None:
                creator = self._asks_before_the_group(read.node)
                fields["advice"] += _NO_GROUP_YET.format(creator=creator) if creator else _UNREACHED
                self.report(read.node, **fields)
                continue
            new = cst.parse_expression(f"{accelerator}.{read.prop}")
            self.report(read.node, edits=[replace(read.node, new)], remove_imports=facts.import_cleanup, **fields)
        if analysis.has_accelerator:
            for branch in flag_branches(analysis):
                self._collapse(branch)
            for choice in same_flag_choices(analysis):
                shown = cst.Module([]).code_for_node(choice.test).strip()
                self.report(choice, edits=[replace(choice, choice.body)], read=f"... if {shown} else ...",
                            advice="both sides now read the same; the choice goes")
        for string in facts.device_strings:
            fields = {"read": cst.Module([]).code_for_node(string), "advice": "use `accelerator.device`"}
            accelerator = analysis.accelerator_at(string)
            if accelerator is None:
                fields["advice"] += _UNREACHED
                self.report(string, **fields)
                continue
            self.report(string, edits=[replace(string, cst.parse_expression(f"{accelerator}.device"))], **fields)

    def _asks_before_the_group(self, read: cst.BaseExpression) -> str | None:
        """`setup_logger("SSD", dist_util.get_rank(), ...)` in main(), which calls `train()`
        after it, where the Accelerator is created (lufficc/SSD, reader R1): the migration
        removed the `init_process_group` that ran first, so the read asks a group that does
        not exist yet. The function that creates the Accelerator, when so."""
        analysis = self.analysis
        if any(word in cst.Module([]).code_for_node(read) for word in ("environ", "getenv")):
            return None  # the launcher's environment is there from the start
        creators = {
            function.name.value for c in analysis.facts.calls
            if (c.qualified or "").rsplit(".", 1)[-1] == "Accelerator"
            and (function := analysis.branches.function_of(c.node)) is not None
        }
        here = analysis.branches.function_of(read)
        if here is None or here.name.value in creators:
            return None
        later = (
            c.func for c in analysis.facts.calls
            if c.func in creators and analysis.branches.function_of(c.node) is here and analysis.order(c.node) > analysis.order(read)
        )
        return next(later, None)

    def _collapse(self, branch: FlagBranch) -> None:
        """`if ddp: <Accelerator values> else: <their one-process values>`: one branch."""
        kept = [line for line in branch.kept if not _only_pass(line)]
        if not kept:  # the launched branch lost everything it did: the `if` goes
            self.report(branch.node, edits=[remove(branch.node)], read=f"if {branch.test}: ... else: ...",
                        advice="nothing is left for either branch to do once the Accelerator places the process")
            return
        first = kept[0]
        kept[0] = first.with_changes(leading_lines=(*branch.node.leading_lines, *first.leading_lines))
        fields = {
            "read": f"if {branch.test}: ... else: ...",
            "advice": "the branch that reads the Accelerator gives on one process what the other gave; it stays alone",
        }
        self.report(branch.node, edits=[replace(branch.node, cst.FlattenSentinel(kept))], **fields)


def _only_pass(line: cst.BaseStatement) -> bool:
    return isinstance(line, cst.SimpleStatementLine) and all(isinstance(small, cst.Pass) for small in line.body)
