"""A parameter the migration makes required is passed by every caller.

Threading the Accelerator into a function (`def train(..., *, accelerator)`) is right
only when the callers are in the run and are updated too; a caller in another file, or
one that cannot see an Accelerator, gets a TypeError at run time.
"""

from __future__ import annotations

import ast
from typing import Iterator

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import Program, call_name, last

CODE = "AM954"
# said of a function another file of the run calls without the Accelerator: a refusal the run decides
CALLED_UNTHREADED = "another file of this project calls it without passing it"
# Entry points by convention: a console script or a launcher calls them by name.
_ENTRY_POINTS = frozenset({"main", "run", "cli", "train_main"})


def check(pair: Pair) -> list[Problem]:
    return list(_new_required(pair)) + list(_setup_nobody_calls(pair))


def _setup_nobody_calls(pair: Pair) -> Iterator[Problem]:
    """An Accelerator the migration creates in a function (or a class) that nothing in
    this file calls or refers to: a worker that torch.multiprocessing starts from another
    module (Hogwild), a library function. Whether it runs once per process, and what
    its caller already set up, cannot be seen from here."""
    after = pair.after
    if any(last(call_name(c)) == "Accelerator" for c in pair.before.calls):
        return
    referenced = {n.id for n in after.nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    referenced |= _ENTRY_POINTS | pair.called_elsewhere
    for call in after.calls:
        if last(call_name(call)) != "Accelerator":
            continue
        scope = after.scope_of.get(call)
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        holder = after.enclosing_class(scope) if scope.name == "__init__" else scope
        if holder is not scope and holder is not None and holder.name in referenced:
            continue
        if holder is scope and after.enclosing_class(scope) is not None:
            continue  # a method: reached through its instance
        if holder is None or holder.name in referenced or holder.decorator_list:
            continue
        kind = "class" if isinstance(holder, ast.ClassDef) else "function"
        yield pair.at_after(
            CODE, call,
            f"left as written: the set-up would be created in the {kind} `{holder.name}`, which nothing in "
            "this file calls (a worker torch.multiprocessing starts, or code another module runs): whether "
            "it runs once per process cannot be seen here; migrate it with its caller",
        )


def _required(function: ast.AST) -> set[str]:
    args = function.args
    positional = args.posonlyargs + args.args
    required = {a.arg for a in positional[: len(positional) - len(args.defaults)]}
    required |= {a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None}
    return required


def _qualname(program: Program, function: ast.AST) -> str:
    parts = [function.name]
    parts += [a.name for a in program.ancestors(function) if isinstance(a, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    return ".".join(reversed(parts))


def _functions(program: Program) -> dict[str, ast.AST]:
    return {_qualname(program, d): d for defs in program.functions.values() for d in defs}


def _new_required(pair: Pair) -> Iterator[Problem]:
    before = _functions(pair.before)
    for qualname, function in _functions(pair.after).items():
        old = before.get(qualname)
        if old is None:
            continue
        added = _required(function) - _required(old) - {a.arg for a in old.args.args + old.args.kwonlyargs}
        if not added:
            continue
        name = "`, `".join(sorted(added))
        if qualname in pair.called_unthreaded:
            yield pair.at_after(
                CODE, function,
                f"left as written: `{qualname}` would need `{name}`, but {CALLED_UNTHREADED} "
                "(that file is not migrated with this one), and would fail; migrate "
                "them together, or keep the function as it is",
            )
            continue
        callers = pair.after.callers_of(function)
        if not callers:
            yield pair.at_after(
                CODE, function,
                f"left as written: `{qualname}` would need `{name}`, but it has no caller in this "
                "file to pass it (callers in other files would fail); migrate it with its callers",
            )
            continue
        for call in callers:
            passed = {k.arg for k in call.keywords} | ({None} if any(k.arg is None for k in call.keywords) else set())
            if None in passed:
                continue
            missing = [a for a in sorted(added) if a not in passed]
            if missing:
                yield pair.at_after(
                    CODE, call,
                    f"left as written: this call of `{function.name}` would not pass `{missing[0]}`, "
                    "which the migration makes required",
                )
