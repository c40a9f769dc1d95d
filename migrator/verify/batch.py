"""The meaning of the batch size is kept, or a finding says it changed.

`DataParallel` splits each batch across the GPUs of one process, and scripts written for
hand-made DDP divide a global batch by the number of processes; after the migration
each process takes a whole `batch_size`. Neither blocks the migration (many users want
N times the batch); both change what `--batch-size` means, so the user is told.
"""

from __future__ import annotations

import ast
import re
from typing import Iterator

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import call_name, last

CODE = "AM917"
_PROCESS_COUNT = re.compile(r"world_size|ngpus|n_gpu|num_gpu|nprocs|device_count|get_world_size|nproc|gpu_count")


# `accelerator.num_processes > 1`: a test of whether several processes run (a launch flag
# rewritten), which says nothing about the batch.
_LAUNCH_TEST = re.compile(r"num_processes\s*(?:==|!=|>|<=)\s*1\b")


def check(pair: Pair) -> list[Problem]:
    if "num_processes" in _LAUNCH_TEST.sub("", pair.after_text) or not pair.after.prepares:
        return []
    return list(_data_parallel_dropped(pair)) + list(_division_dropped(pair)) + list(_multiplied_by_gpus(pair))


def _data_parallel_dropped(pair: Pair) -> Iterator[Problem]:
    kept = sum(last(call_name(c)) == "DataParallel" for c in pair.after.calls)
    dropped = [c for c in pair.before.calls if last(call_name(c)) == "DataParallel"]
    if dropped and not kept:
        contrastive = next((n for n in map(call_name, pair.before.calls) if _IN_BATCH_LOSS.search(last(n))), None)
        advice = (
            f"; `{contrastive}(...)` compares the samples of a batch with each other: under DataParallel it saw the "
            "whole batch, now each process's alone (smaller still if divided), so gather the features across "
            "processes before it (`accelerator.gather`) to keep what it compares"
        ) if contrastive else " (divide the batch size by `accelerator.num_processes` to keep it)"
        yield _note(
            dropped[0],
            "DataParallel split each batch across this machine's GPUs; after the migration each "
            "process takes a whole batch, so the global batch is N times larger" + advice,
        )


# losses over the pairs of one batch (SupContrast's SupConLoss, SimCLR's NT-Xent, InfoNCE, triplets)
_IN_BATCH_LOSS = re.compile(r"^(?=.*(?:loss|nt_?xent|infonce))(?=.*(?:supcon|nt_?xent|infonce|contrast|triplet))", re.IGNORECASE)


def _division_dropped(pair: Pair) -> Iterator[Problem]:
    for node in pair.before.nodes:
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)):
            text = ast.unparse(node)
            if "batch" in text.lower() and _PROCESS_COUNT.search(ast.unparse(node.right)):
                yield _note(
                    node,
                    f"the original divides the batch by the number of processes (`{text}`); "
                    "after the migration that number is not the Accelerator's, so each process may "
                    "take the whole batch: use `accelerator.num_processes` to keep the meaning",
                )
                return


_PER_GPU = re.compile(r"batch|workers")


def _multiplied_by_gpus(pair: Pair) -> Iterator[Problem]:
    """`opt.batch_size = opt.batch_size * opt.num_gpu` (clovaai, with `opt.workers * opt.num_gpu`):
    a DataParallel script sizes one process's batch and loader workers for every GPU of the
    machine. Under the launcher each process runs that line too, with one GPU of its own: N
    times the batch and the workers in each process (reader R1, sixteenth session)."""
    told = set()
    for node in pair.after.nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.BinOp):
            target, value = node.targets[0], node.value
            if not isinstance(value.op, ast.Mult):
                continue
            counts = [side for side in (value.left, value.right) if _PROCESS_COUNT.search(ast.unparse(side))]
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Mult):
            target, counts = node.target, [node.value] if _PROCESS_COUNT.search(ast.unparse(node.value)) else []
        else:
            continue
        found = _PER_GPU.search(ast.unparse(target).lower())
        if found and counts and found.group() not in told:
            told.add(found.group())
            yield _note_after(
                pair, node,
                f"`{ast.unparse(node)}` sizes one process for every GPU of the machine (as DataParallel "
                "needed); under the launcher each process runs it with one GPU of its own, so each takes "
                f"{'N times the batch' if found.group() == 'batch' else 'N times the loader workers'}: "
                "drop the factor (or divide by `accelerator.num_processes`)",
            )


def _note_after(pair: Pair, node: ast.AST, message: str) -> Problem:
    """A note at the original's line of `node` of the migrated text."""
    problem = pair.at_after(CODE, node, message)
    return Problem(problem.code, problem.line, problem.col, problem.message, blocking=False)


def _note(node: ast.AST, message: str) -> Problem:
    return Problem(CODE, node.lineno, node.col_offset + 1, message, blocking=False)
