"""A migration does not put a second backward through a prepared model (AM959).

A gradient penalty (WGAN-GP's `torch.autograd.grad(outputs=d_out, inputs=x_hat,
create_graph=True)`, then a backward of the gradient's norm) differentiates through the
discriminator twice. DistributedDataParallel synchronises gradients in the backward of
its forward and expects every parameter it waits for to get one: the penalty's backward
reaches only some of them, and the next forward stops with "Expected to have finished
reduction in the prior iteration" (Self-Attention-GAN's trainer, reader R1, seventeenth
session; `find_unused_parameters=True` did not help). Reads only the migrated text.
"""

from __future__ import annotations

import ast
from typing import Iterator

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import call_name, last

CODE = "AM959"


def check(pair: Pair) -> list[Problem]:
    program = pair.after
    if not any(program.kind_of(a) == "other" for p in program.prepares for a in p.args if a):
        return []  # no model prepared: nothing is wrapped in DDP
    return list(_double_backward(pair))


def _double_backward(pair: Pair) -> Iterator[Problem]:
    for call in pair.after.calls:
        if not _differentiates_with_graph(call):
            continue
        function = next((a for a in pair.after.ancestors(call) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if function is None or not _steps(function):
            continue
        yield pair.at_after(
            CODE, call,
            "left as written: the training step differentiates through the prepared model twice (`autograd.grad` "
            "with `create_graph=True`, a gradient penalty, then a backward of it); DistributedDataParallel "
            "synchronises gradients only for a plain backward of its forward, so on N processes the next step "
            "stops with \"Expected to have finished reduction\"; compute the penalty on "
            "`accelerator.unwrap_model(...)` and average those gradients across processes by hand, or keep the "
            "script single-process",
        )
        return


def _differentiates_with_graph(call: ast.Call) -> bool:
    """`torch.autograd.grad(..., create_graph=True)` (or `grad(...)` imported from it)."""
    name = call_name(call)
    if last(name) != "grad" or ("autograd" not in name and name != "grad"):
        return False
    return any(k.arg == "create_graph" and isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords)


def _steps(function: ast.AST) -> bool:
    """The function also runs a backward (the penalty is part of a training step)."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
        for n in ast.walk(function)
    )
