"""A call that prepares or trains, made again in an `except` handler, runs on one process.

Pytorch-UNet catches `torch.cuda.OutOfMemoryError` around `train_model(...)` and calls it
again with gradient checkpointing on. After the migration `train_model` prepares and
trains with collectives: only the process that ran out of memory retries (it prepares a
second wrapper of the model), while the others wait in the all-reduce of the step it
left: the run hangs. The migration is kept (one process retries as before); the finding
says so beside it.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Iterator

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import Program, call_name, last

CODE = "AM922"
# What makes a function a collective one once migrated.
_COLLECTIVE = {"prepare", "backward", "reduce", "gather", "gather_for_metrics", "wait_for_everyone"}


def check(pair: Pair) -> list[Problem]:
    if "except" not in pair.after_text:
        return []
    return list(_retried(pair))


def _retried(pair: Pair) -> Iterator[Problem]:
    after = pair.after
    collective = _collective_functions(after)
    if not collective:
        return
    for handler in (n for n in after.nodes if isinstance(n, ast.ExceptHandler)):
        for node in ast.walk(handler):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in collective:
                yield replace(pair.at_after(
                    CODE, node,
                    f"`{node.func.id}(...)` is run again when the call before it raised: after the migration it "
                    "prepares or trains with the other processes, and on N processes only the one that failed "
                    "runs it again (a second wrapper, collectives the others never join): the run hangs; "
                    "retry on every process (agree on the failure first) or stop instead",
                ), blocking=False)
                return


def _collective_functions(program: Program) -> set[str]:
    """The module's functions whose migrated body prepares, steps backward or reduces
    through the Accelerator."""
    out = set()
    for name, defs in program.functions.items():
        for function in defs:
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _COLLECTIVE and "accelerator" in call_name(node)
                ):
                    out.add(name)
    return out
