"""A running sum reduced across processes and divided by the data set's size, or an
evaluation's running meters added up across processes, are a little high.

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
    return list(_reduced_sums_over_dataset(pair)) + list(_reduced_meters_after_evaluation(pair))


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


def _reduced_meters_after_evaluation(pair: Pair) -> Iterator[Problem]:
    """AM522's `for meter in (...): meter.sum, meter.count = accelerator.reduce(...)` after
    a loop that does not train: the evaluation's averages count the repeated samples (in
    training they were trained on, and count as such)."""
    before = {ast.unparse(n) for n in pair.before.nodes if isinstance(n, ast.Assign)}
    for node in pair.after.nodes:
        for body in _bodies(node):
            for previous, statement in zip(body, body[1:]):
                meters = _meters_reduced(statement, before)
                if meters and not any(_is_backward(c) for c in ast.walk(previous)):
                    yield replace(pair.at_after(
                        CODE, previous,  # the loop that fills them: a line of the original
                        f"the running meters {meters} are added up across processes, and the prepared loader "
                        "repeats a few samples in its last batch so every process gets as many batches: their "
                        "averages count those repeats (up to processes × batch − 1 samples; exact when the data "
                        "set's size divides by processes × batch); feed them per-sample values from "
                        "`accelerator.gather_for_metrics` for an exact figure",
                    ), blocking=False)


def _bodies(node: ast.AST) -> list[list[ast.stmt]]:
    return [b for b in (getattr(node, "body", None), getattr(node, "orelse", None)) if isinstance(b, list) and len(b) > 1]


def _meters_reduced(statement: ast.stmt, before: set[str]) -> str | None:
    """`for meter in (losses, top1): meter.sum, meter.count = <reduce>...`: "`losses`, `top1`"."""
    if not (isinstance(statement, ast.For) and isinstance(statement.iter, ast.Tuple)):
        return None
    for inner in statement.body:
        if (
            isinstance(inner, ast.Assign) and isinstance(inner.targets[0], ast.Tuple)
            and [getattr(e, "attr", None) for e in inner.targets[0].elts] == ["sum", "count"]
            and any(isinstance(c, ast.Call) and last(call_name(c)) == "reduce" for c in ast.walk(inner.value))
            and ast.unparse(inner) not in before
        ):
            return ", ".join(f"`{ast.unparse(e)}`" for e in statement.iter.elts)
    return None


def _is_backward(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and last(call_name(node)) == "backward"
