"""A migration does not put a second backward through a prepared model (AM959).

A gradient penalty (WGAN-GP's `torch.autograd.grad(outputs=d_out, inputs=x_hat,
create_graph=True)`, then a backward of the gradient's norm) differentiates through the
discriminator twice. DistributedDataParallel synchronises gradients in the backward of
its forward and expects every parameter it waits for to get one: the penalty's backward
reaches only some of them, and the next forward stops with "Expected to have finished
reduction in the prior iteration" (Self-Attention-GAN's trainer, reader R1, seventeenth
session; `find_unused_parameters=True` did not help). Two backwards through one forward
of a prepared model (pix2pixHD's model returns the generator's and the discriminator's
losses; `loss_G.backward()`, then `loss_D.backward()`) are the other shape: DDP
synchronises the gradients of the first backward after a forward only, so the second's
stay per process and the copies drift apart with no error (a 2-process gloo probe).
Reads only the migrated text.
"""

from __future__ import annotations

import ast
from typing import Iterator

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import call_name, dotted, last

CODE = "AM959"


def check(pair: Pair) -> list[Problem]:
    program = pair.after
    models = {t for p in program.prepares for t in p.targets if t and program.kind_of(t) == "other"}
    if not models:
        return []  # no model prepared: nothing is wrapped in DDP
    return list(_double_backward(pair)) + list(_backwards_of_one_forward(pair, models))


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


def _backwards_of_one_forward(pair: Pair, models: set[str]) -> Iterator[Problem]:
    """A backward of a loss computed by the same call of a prepared model as an earlier
    backward's loss in the same function, with no forward of it between: the first such
    pair of each function is named."""
    program = pair.after
    steps: dict[ast.AST, list[tuple[ast.Call, set[ast.Call]]]] = {}
    for call in program.calls:
        loss = _backward_of(call, program)
        if loss is not None:
            steps.setdefault(program.scope_of.get(call), []).append((call, _forwards(program, loss, call, models)))
    for backwards in steps.values():
        found = _sharing_a_forward(program, backwards)
        if found is None:
            continue
        first, second, forward = found
        # gradients cleared between the two (`opt_D.zero_grad()`): the first loss's share of what the
        # second steps is thrown away (a GAN's generator loss reaching the discriminator), so one sum would differ
        cleared = any(last(call_name(c)) == "zero_grad" and first.lineno < c.lineno < second.lineno for c in program.calls)
        remedy = (
            "run a forward for each backward (where a part of the module gets no gradient from one of them, a "
            "generator detached in the discriminator's loss, prepare the parts as separate models, or add "
            "`find_unused_parameters=True`)"
        ) if cleared else "add the losses into one backward, or run a forward for each"
        yield pair.at_after(
            CODE, second,
            f"left as written: this backward and the one on line {pair.original_line(first.lineno)} both go through "
            f"one forward of the prepared `{call_name(forward)}` (line {pair.original_line(forward.lineno)}); "
            "DistributedDataParallel synchronises the gradients of the first backward after a forward only, so these "
            f"stay per process and the copies drift apart with no error; {remedy}",
        )


def _sharing_a_forward(program, backwards: list[tuple[ast.Call, set[ast.Call]]]) -> tuple[ast.Call, ast.Call, ast.Call] | None:
    """(first backward, second backward, the forward both go through), in order, or None."""
    for j, (second, later) in enumerate(backwards):
        for first, earlier in backwards[:j]:
            shared = earlier & later
            if shared and not _alternatives(program, first, second) and not _forward_between(program, first, second, shared):
                return first, second, min(shared, key=lambda c: c.lineno)
    return None


def _backward_of(call: ast.Call, program) -> ast.AST | None:
    """The loss of `loss.backward()` or `accelerator.backward(loss)`."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr != "backward":
        return None
    if program.is_accelerator(func.value):
        return call.args[0] if call.args else None
    return func.value


def _forwards(program, expr: ast.AST, at: ast.AST, models: set[str], depth: int = 8) -> set[ast.Call]:
    """The calls of prepared models a value is computed from, through the names it reads
    (their last binding above `at` in the same scope), leaving out what is detached."""
    found: set[ast.Call] = set()
    todo, seen = [(expr, at, 0)], set()
    while todo:
        node, where, level = todo.pop()
        for part in _attached(node):
            if isinstance(part, ast.Call) and (dotted(part.func) or "") in models:
                found.add(part)
            elif isinstance(part, ast.Name) and isinstance(part.ctx, ast.Load) and level < depth:
                bound = _last_binding(program, part.id, where)
                if bound is None or id(bound.node) in seen:
                    continue
                seen.add(id(bound.node))
                # `losses, generated = model(...)`: an element of what the call returns
                value = bound and (bound.value or (bound.node.value if isinstance(bound.node, ast.Assign) else None))
                if value is not None:
                    todo.append((value, bound.node, level + 1))
    return found


def _attached(node: ast.AST) -> Iterator[ast.AST]:
    """Every node of `node` but those under `.detach()`, `.item()` or `.data`."""
    todo = [node]
    while todo:
        current = todo.pop()
        if isinstance(current, ast.Call) and isinstance(current.func, ast.Attribute) and current.func.attr in ("detach", "item"):
            continue
        if isinstance(current, ast.Attribute) and current.attr == "data":
            continue
        yield current
        todo.extend(ast.iter_child_nodes(current))


def _last_binding(program, name: str, at: ast.AST):
    """The last assignment of `name` above `at` in its scope, or the `with ... as name:`
    around it (written on the same line: `with amp.scale_loss(...) as s: s.backward()`)."""
    scope = program.scope_of.get(at)
    line = getattr(at, "lineno", 0)
    around = set(program.ancestors(at))
    above = [
        a for a in program.assigns
        if a.target == name and a.scope is scope and (getattr(a.node, "lineno", 0) < line or a.node in around and isinstance(a.node, (ast.With, ast.AsyncWith)))
    ]
    return max(above, key=lambda a: a.node.lineno, default=None)


def _alternatives(program, first: ast.AST, second: ast.AST) -> bool:
    """In the two branches of one `if` (`if fp16: scaled.backward() else: loss.backward()`)."""
    mine = list(program.ancestors(first))
    for node in program.ancestors(second):
        if isinstance(node, ast.If) and node in mine:
            return _in(node.body, first) != _in(node.body, second)
    return False


def _in(body: list[ast.stmt], node: ast.AST) -> bool:
    return any(node is n for statement in body for n in ast.walk(statement))


def _forward_between(program, first: ast.AST, second: ast.AST, forwards: set[ast.Call]) -> bool:
    """The model runs again between the two backwards (a fresh forward for the second)."""
    names = {dotted(f.func) for f in forwards}
    return any(
        dotted(c.func) in names and first.lineno < c.lineno < second.lineno for c in program.calls
    )
