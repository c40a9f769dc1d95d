"""Checkpoints written before the migration still load after it, or a finding says why not.

A model wrapped in DataParallel or DistributedDataParallel by hand saves and loads state
dicts whose keys start with `module.`. After the migration the load goes into the plain
model (prepare() wraps it afterwards), so the user's existing checkpoints, and any the
script downloads, no longer match. The migration is kept; the finding says what to do.
"""

from __future__ import annotations

import ast
from typing import Iterator

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import Program, call_name, dotted, last

CODE = "AM920"
_WRAPS = {"DataParallel", "DistributedDataParallel"}


def check(pair: Pair) -> list[Problem]:
    if any(last(call_name(c)) in _WRAPS for c in pair.after.calls):
        return []
    return list(_loads_into_unwrapped(pair))


def _loads_into_unwrapped(pair: Pair) -> Iterator[Problem]:
    before = pair.before
    wrapped = {a.target for a in before.assigns if _is_wrap(a.value)}
    told = set()  # once per function: ddim's resume in train() and its load in sample() both change
    for call in before.calls:
        func = call.func
        owner = dotted(func.value) if isinstance(func, ast.Attribute) and func.attr == "load_state_dict" else None
        scope = before.scope_of.get(call)
        if owner in wrapped and id(scope) not in told and _wrapped_at(before, owner, call):
            told.add(id(scope))
            yield Problem(
                CODE, call.lineno, call.col_offset + 1,
                f"checkpoints saved by the wrapped `{dotted(func.value)}` have keys starting with `module.`; "
                "after the migration this load goes into the plain model, so old checkpoints no longer "
                "match: strip the prefix (`{k.removeprefix('module.'): v for k, v in state.items()}`)"
                + (_SAVED_PLAIN if _saves_state_of(before, owner) else ""),
                blocking=False,
            )


# the other way round (reader R1, sixteenth session: clovaai's test.py and demo.py wrap the
# model in DataParallel and load strictly what train.py saves)
_SAVED_PLAIN = (
    "; the other way round, the checkpoints this script writes now have no prefix, so another script "
    "that wraps the model before loading them (an evaluation, a demo) needs the same change"
)


def _saves_state_of(program: Program, owner: str) -> bool:
    """The script saves the wrapped model's state dict (`torch.save(model.state_dict(), path)`)."""
    return any(
        last(call_name(c)) == "save" and f"{owner}.state_dict()" in ast.unparse(c)
        for c in program.calls
    )


_MOVES = {"to", "cuda", "cpu", "half", "float"}


def _is_wrap(value: ast.AST | None) -> bool:
    """`DataParallel(model)`, also moved on the way: `nn.DataParallel(model).to(device)`."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _MOVES:
        value = value.func.value
    return isinstance(value, ast.Call) and last(call_name(value)) in _WRAPS


def _wrapped_at(program: Program, owner: str, node: ast.AST, depth: int = 0) -> bool:
    """Whether `owner` is the wrapper where `node` loads into it: the latest binding above
    it in its scope is the wrap; in a method bound nowhere in it, wrapped at some
    `self.<method>(...)` call of the same class (a `_resume()` that `__init__` calls before
    wrapping loads into the plain model). Unknown callers: assume wrapped."""
    scope = program.scope_of.get(node)
    earlier = [a for a in program.assigns if a.scope is scope and a.target == owner and a.node.lineno < node.lineno]
    if earlier:
        return _is_wrap(getattr(max(earlier, key=lambda a: a.node.lineno).node, "value", None))
    cls = program.enclosing_class(scope) if scope is not None else None
    callers = program.callers_of(scope) if cls is not None and owner.startswith("self.") else []
    if depth >= 3 or not callers or any(
        dotted(getattr(c.func, "value", None)) != "self" or program.enclosing_class(program.scope_of.get(c)) is not cls
        for c in callers
    ):
        return True
    return any(_wrapped_at(program, owner, c, depth + 1) for c in callers)
