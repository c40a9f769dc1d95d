"""A step interval sized from the data set counts one process's batches.

Pytorch-UNet evaluates five times an epoch: `division_step = n_train // (5 * batch_size)`
with `n_train = len(dataset) - n_val`, then `if global_step % division_step == 0`. After
the migration each process takes 1/N of the batches, so its `global_step` grows N times
more slowly and the evaluations (and the plateau scheduler stepped there) come N times
less often. The migration is kept; the finding says what changed and how to keep it.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Iterator

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import Program, dotted

CODE = "AM923"


def check(pair: Pair) -> list[Problem]:
    if ".prepare(" not in pair.after_text or "%" not in pair.after_text:
        return []
    return list(_intervals(pair))


def _intervals(pair: Pair) -> Iterator[Problem]:
    after = pair.after
    told: set[str] = set()
    for node in after.nodes:
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.right, ast.Name)):
            continue
        name = node.right.id
        if name in told or not _counts_dataset_batches(after, name, after.scope_of.get(node)):
            continue
        told.add(name)
        yield replace(pair.at_after(
            CODE, node,
            f"`{name}` counts the batches of the whole data set, and each process now takes 1/N of them: "
            f"`{dotted(node.left) or 'the step count'} % {name}` comes round N times less often (evaluations, "
            f"logs and what steps with them); divide `{name}` by `accelerator.num_processes` to keep it per epoch",
        ), blocking=False)


def _counts_dataset_batches(program: Program, name: str, scope) -> bool:
    """`name` is bound in `scope` to a division of a data set's size by a batch size."""
    sizes = _dataset_sizes(program, scope)
    for a in program.assigns:
        if a.target != name or a.scope is not scope or a.value is None:
            continue
        for div in (n for n in ast.walk(a.value) if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.FloorDiv, ast.Div))):
            left = {n.id for n in ast.walk(div.left) if isinstance(n, ast.Name)}
            right = {n.id for n in ast.walk(div.right) if isinstance(n, ast.Name)} | {
                n.attr for n in ast.walk(div.right) if isinstance(n, ast.Attribute)
            }
            sized = bool(left & sizes) or any(_is_len(n) for n in ast.walk(div.left))
            if sized and any("batch" in r.lower() for r in right):
                return True
    return False


def _dataset_sizes(program: Program, scope) -> set[str]:
    """Names bound in `scope` from `len(...)` of something that is not a loader."""
    out = set()
    for a in program.assigns:
        if a.scope is scope and a.value is not None and any(_is_len(n) for n in ast.walk(a.value)):
            out.add(a.target)
    return out


def _is_len(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and node.args):
        return False
    text = (dotted(node.args[0]) or "").lower()
    return "loader" not in text and not text.endswith("_dl")
