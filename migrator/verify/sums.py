"""A running sum reduced across processes and divided by the data set's size is a little high.

A prepared training loader gives every process the same number of batches; when the data
set does not divide evenly it repeats a few samples in the last batch. `gather_for_metrics`
drops those repeats; a sum reduced with `accelerator.reduce` cannot, so the average the
script prints counts them (about 0.3% on MNIST with 2 processes). The migration is kept
(training is unaffected); the finding says so.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Iterator

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import call_name, last

CODE = "AM921"


def check(pair: Pair) -> list[Problem]:
    if "reduce" not in pair.after_text:
        return []
    return list(_reduced_sums_over_dataset(pair))


def _reduced_sums_over_dataset(pair: Pair) -> Iterator[Problem]:
    before = {ast.unparse(n) for n in pair.before.nodes if isinstance(n, ast.Assign)}
    reduced = {
        node.targets[0].id: node
        for node in pair.after.nodes
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        and any(isinstance(c, ast.Call) and last(call_name(c)) == "reduce" for c in ast.walk(node.value))
        and "sum" in ast.unparse(node.value) and ast.unparse(node) not in before
    }
    for node in pair.after.nodes:
        if (
            isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
            and isinstance(node.left, ast.Name) and node.left.id in reduced and _dataset_size(node.right)
        ):
            yield replace(pair.at_after(
                CODE, reduced.pop(node.left.id),
                f"`{node.left.id}` is summed across processes, and the prepared loader repeats a few "
                "samples in its last batch so every process gets as many batches: the average divided by "
                "the data set's size is a little high (exact when the size divides by processes × batch); "
                "gather per batch with `accelerator.gather_for_metrics` for an exact figure",
            ), blocking=False)


def _dataset_size(expr: ast.AST) -> bool:
    """`len(<loader>.dataset)` (or `len(<x>.sampler)`)."""
    return (
        isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "len" and len(expr.args) == 1
        and isinstance(expr.args[0], ast.Attribute) and expr.args[0].attr in ("dataset", "sampler")
    )
