"""AM911: `torch.distributed` calls the migration has no rewrite for."""

from __future__ import annotations

import libcst as cst

from migrator.rule import Example, Rule


class RawDistributedCall(Rule):
    """## What it does
    Reports calls of `torch.distributed` (`all_gather`, `broadcast`, `reduce`,
    `new_group`, ...) in a script being migrated, other than those rewritten by AM213
    (init/destroy), AM215 (barrier), AM216 (all_reduce) and AM217 (get_rank,
    get_world_size).

    ## Why is this bad?
    They need a process group: under the launcher they run on the default group the
    Accelerator makes, but on one process (`python train.py`, the CPU) there is none and
    they raise; and they bypass what the Accelerator knows (the padding it added to even
    out the last batch, for instance). A call under a test of the process count or of the
    group (`if dist.is_initialized():`), or after an early `if world_size < 2: return` in
    its function, never runs on one process and is not reported, unless it gathers: the
    samples a prepared loader repeats to even out the last batch are in what it gathers.

    ## What to do by hand
    Use the Accelerator's collectives: `accelerator.gather(t)` (or
    `gather_for_metrics` for evaluation outputs), `accelerator.reduce(t)`,
    `accelerator.pad_across_processes(t)`, and `accelerate.utils.broadcast` where the
    target is Accelerate; guard anything else with `if accelerator.num_processes > 1:`.

    ## Example
    ```python
    dist.all_gather(outputs, output)
    ```

    Use instead:
    ```python
    outputs = accelerator.gather(output)
    ```
    """

    code = "AM911"
    name = "raw-distributed-call"
    message = "`{call}` calls torch.distributed directly: {why}; use the Accelerator's collectives{remedy}"
    examples = (
        Example(
            before=(
                "import torch\nimport torch.distributed as dist\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nx = torch.zeros(2)\nxs = [torch.zeros(2)]\ndist.all_gather(xs, x)\n"
            ),
            at=("8:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        for call in analysis.patterns.distribution.raw_calls:
            name = cst.Module([]).code_for_node(call.func).strip()
            if not self._guarded(call):
                self.report(call, call=f"{name}()", why=_NO_GROUP, remedy=" or guard it (`if accelerator.num_processes > 1:`)")
            elif "gather" in name.rsplit(".", 1)[-1]:
                self.report(call, call=f"{name}()", why=_REPEATS, remedy=" (`accelerator.gather_for_metrics(...)` drops them)")

    def _guarded(self, call: cst.Call) -> bool:
        """Under a test of the process count or of the group (`if dist.is_initialized():`),
        or after an early `if world_size < 2: return ...` in its function (lufficc/SSD's
        `reduce_loss_dict`): on one process it never runs."""
        parent = self.analysis.parent
        statement, child, node = None, call, parent(call)
        while node is not None and not isinstance(node, cst.Module):
            if isinstance(node, cst.If) and child is not node.test and _counts_processes(node.test):
                return True
            if isinstance(node, cst.FunctionDef):
                body = list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else []
                earlier = body[: body.index(statement)] if statement in body else ()
                return any(isinstance(s, cst.If) and _counts_processes(s.test) and _returns(s) for s in earlier)
            statement, child, node = child, node, parent(node)
        return False


_NO_GROUP = (
    "under the launcher it runs on the process group the Accelerator makes, but on one process there is none and it raises"
)
_REPEATS = "it gathers what each process computed, with the samples a prepared loader repeats to even out the last batch"
_GROUP_WORDS = ("num_processes", "world_size", "is_initialized", "distributed", "get_world_size")


def _counts_processes(test: cst.BaseExpression) -> bool:
    return any(word in cst.Module([]).code_for_node(test) for word in _GROUP_WORDS)


def _returns(branch: cst.If) -> bool:
    """`if world_size < 2: return loss_dict`: the branch leaves the function."""
    body = branch.body.body if isinstance(branch.body, cst.IndentedBlock) else ()
    last = body[-1] if body else None
    inner = last.body[-1] if isinstance(last, cst.SimpleStatementLine) and last.body else last
    return isinstance(inner, cst.Return)
