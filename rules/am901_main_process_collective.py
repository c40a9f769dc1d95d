"""AM901: a collective that only the main process (or only the others) reaches."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Audience, RankBranch
from migrator.rule import Example, Rule

# Accelerator methods that wait for the other processes, with Hugging Face Accelerate, only
# when the model is sharded (DeepSpeed, FSDP); the bundled runtime's always wait.
_SHARDED_ONLY = {"save_state", "load_state", "save_model", "get_state_dict"}


class MainProcessCollective(Rule):
    """## What it does
    Reports a collective — `accelerator.wait_for_everyone()`, `gather()`,
    `gather_for_metrics()`, `reduce()`, `pad_across_processes()`, `save_state()`,
    `load_state()`, `save_model()`, `get_state_dict()`, `prepare()`,
    `main_process_first()`, `accelerator.backward()` of a prepared (DDP) model,
    `torch.distributed.barrier/all_reduce/broadcast/...`, `accelerate.utils.gather_object`
    — that runs inside a branch only some processes take: `if accelerator.is_main_process:`,
    `if accelerator.is_local_main_process:`, `if accelerator.process_index == 0:`,
    `if rank == 0:`, `if args.local_rank in (-1, 0):`, `if dist.get_rank() == 0:`, their
    `else`, the rest of a block after `if not accelerator.is_main_process: return`, and
    functions decorated with `@accelerator.on_main_process`. A call to a function of the
    same file that runs a collective counts too (`if accelerator.is_main_process:
    evaluate(model)`).

    ## Why is this bad?
    A collective returns only when every process has called it. The main process waits
    for peers that never arrive (they took the other branch), so on N processes the run
    hangs until the NCCL/gloo timeout — usually 30 minutes later, with no error pointing at
    the line. On one process nothing is wrong, which is why this survives testing.
    With Hugging Face Accelerate (`--target accelerate`), `save_state`, `load_state`,
    `save_model` and `get_state_dict` wait for the others only when the model is sharded
    (DeepSpeed, FSDP); the message says so. The bundled runtime's always wait.

    ## Example
    ```python
    if accelerator.is_main_process:
        accelerator.wait_for_everyone()
        accelerator.save_state("ckpt")
    ```

    Use instead:
    ```python
    accelerator.wait_for_everyone()
    accelerator.save_state("ckpt")
    if accelerator.is_main_process:
        ...  # work only the main process does (logging, writing a summary)
    ```

    ## Known limits
    The old "main process first" idiom — the same collective under a test only the other
    processes pass (`if not accelerator.is_main_process:`, `if args.local_rank not in [-1, 0]:`,
    `if dist.get_rank() != 0:`) and under one only the main process passes, in one function,
    as many times in each — is recognised and not reported, however the two tests are written. Rank tests hidden in
    helper functions other than `is_main_process()`-style names are not recognised.

    ## See also
    - huggingface/accelerate#2785: a script hangs on `gather_for_metrics()` placed under
      `accelerator.is_main_process` (https://github.com/huggingface/accelerate/issues/2785)
    - huggingface/accelerate#1171: `save_state` under `is_main_process` hangs
      (https://github.com/huggingface/accelerate/issues/1171)
    - huggingface/accelerate#2733: `gather_object` under `is_main_process` hangs
    - huggingface/transformers#31532: evaluation entered only by the main process hangs
      in `gather_for_metrics`
    """

    code = "AM901"
    name = "main-process-collective"
    message = "`{call}` waits for every process but runs only on {who} ({where}): {outcome}"
    examples = (
        Example(
            before=(
                "from runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "if accelerator.is_main_process:\n    accelerator.wait_for_everyone()\n"
            ),
            at=("5:5",),
        ),
        Example(
            before=(
                "from runtime import Accelerator\n\naccelerator = Accelerator()\n\n"
                "def evaluate(preds):\n    return accelerator.gather_for_metrics(preds)\n\n"
                "if accelerator.process_index == 0:\n    evaluate(1)\n"
            ),
            at=("9:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        branches = analysis.branches
        found: list[tuple[cst.Call, str, RankBranch]] = []
        for collective in branches.collectives:
            branch = branches.branch_of(collective.call)
            if branch is not None:
                found.append((collective.call, collective.name, branch))
        for fact in analysis.facts.calls:
            reached = branches.collective_in_function(fact.node)
            if reached is None:
                continue
            branch = branches.branch_of(fact.node)
            if branch is not None:
                shown = f"{cst.Module([]).code_for_node(fact.node.func)}() → {reached}"
                found.append((fact.node, shown, branch))
        paired = self._paired(found)
        for call, shown, branch in found:
            if self._key(call, shown, branch) in paired:
                continue
            self.report(call, call=shown, who=branch.audience.value, where=branch.describe(), outcome=self._outcome(shown))

    def _outcome(self, shown: str) -> str:
        """Accelerate's checkpoint methods synchronise only under DeepSpeed/FSDP; the
        bundled runtime's always do."""
        method = shown.rsplit(".", 1)[-1].rstrip("()")
        if self.ctx.target.value == "accelerate" and method in _SHARDED_ONLY:
            return "under DeepSpeed or FSDP the run hangs"
        return "the run hangs"

    def _paired(self, found: list[tuple[cst.Call, str, RankBranch]]) -> set[tuple[int, str]]:
        """(scope, collective) run as often by the main process as by the others, in one
        function: the two halves meet (the main-process-first idiom). The tests may be
        written differently: `if args.local_rank not in [-1, 0]:` before the download and
        `if args.local_rank == 0:` after it, or `!= 0` and `== 0`."""
        counts: dict[tuple[int, str], list[int]] = {}
        for call, shown, branch in found:
            pair = counts.setdefault(self._key(call, shown, branch), [0, 0])
            pair[branch.audience is Audience.MAIN] += 1
        return {key for key, (others, main) in counts.items() if others == main}

    def _key(self, call: cst.Call, shown: str, branch: RankBranch) -> tuple[int, str]:
        return (id(self.analysis.scope_of(call)), shown)
