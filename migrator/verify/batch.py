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
_PROCESS_COUNT = re.compile(r"world_size|ngpus|n_gpu|num_gpus|nprocs|device_count|get_world_size|nproc")


# `accelerator.num_processes > 1`: a test of whether several processes run (a launch flag
# rewritten), which says nothing about the batch.
_LAUNCH_TEST = re.compile(r"num_processes\s*(?:==|!=|>|<=)\s*1\b")


def check(pair: Pair) -> list[Problem]:
    if "num_processes" in _LAUNCH_TEST.sub("", pair.after_text) or not pair.after.prepares:
        return []
    return list(_data_parallel_dropped(pair)) + list(_division_dropped(pair))


def _data_parallel_dropped(pair: Pair) -> Iterator[Problem]:
    kept = sum(last(call_name(c)) == "DataParallel" for c in pair.after.calls)
    dropped = [c for c in pair.before.calls if last(call_name(c)) == "DataParallel"]
    if dropped and not kept:
        yield _note(
            dropped[0],
            "DataParallel split each batch across this machine's GPUs; after the migration each "
            "process takes a whole batch, so the global batch is N times larger (divide the batch "
            "size by `accelerator.num_processes` to keep it)",
        )


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


def _note(node: ast.AST, message: str) -> Problem:
    return Problem(CODE, node.lineno, node.col_offset + 1, message, blocking=False)
