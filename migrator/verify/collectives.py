"""A migration adds no collective that only the main process reaches (AM957).

`if accelerator.is_main_process: evaluate(model, loader)`, where the migration gathered
the metrics inside `evaluate()`: the main process waits in `gather_for_metrics` for peers
that never call it, and the run hangs on N processes (on one it is fine, which is why it
survives testing). The lint reports such a collective where a user wrote it; a migration
that creates one is not written. Reads only the text: the branches under a main-process
test, and the functions of the file they call (a few calls deep).
"""

from __future__ import annotations

import ast
from typing import Iterator

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import Program, call_name, dotted, last

CODE = "AM957"
_COLLECTIVES = {
    "wait_for_everyone", "gather", "gather_for_metrics", "reduce", "pad_across_processes", "save_state",
    "load_state", "save_model", "get_state_dict", "prepare", "main_process_first",
}
_MAIN_TESTS = {"is_main_process", "is_local_main_process"}
_DEPTH = 3


def check(pair: Pair) -> list[Problem]:
    before = {name for name, _ in _main_only_collectives(pair.before)}
    return list(_new(pair, before))


def _new(pair: Pair, before: set[str]) -> Iterator[Problem]:
    for shown, call in _main_only_collectives(pair.after):
        if shown not in before:
            yield pair.at_after(
                CODE, call,
                f"left as written: the migration would make `{shown}` wait for every process "
                "where only the main process runs (under `if accelerator.is_main_process:`), so "
                "the run would hang on N processes; run that code on every process (and print or "
                "save its result on the main one), or migrate it by hand",
            )
            return


def _main_only_collectives(program: Program) -> list[tuple[str, ast.Call]]:
    """(how to show it, the call in the main-only branch that reaches it). The "main
    process first" idiom, the same collective under `if not accelerator.is_main_process:`
    in the same function, is every process's."""
    main: list[tuple[str, ast.Call, ast.AST | None]] = []
    others: set[tuple[str, int]] = set()
    for node in program.nodes:
        if not isinstance(node, ast.If):
            continue
        audience = _audience(node.test)
        if audience is None:
            continue
        for statement in node.body:
            for call in (n for n in ast.walk(statement) if isinstance(n, ast.Call)):
                found = _collective(program, call, _DEPTH, set())
                if found and audience == "main":
                    main.append((found, call, program.scope_of.get(node)))
                elif found:
                    others.add((found, id(program.scope_of.get(node))))
    return [(found, call) for found, call, scope in main if (found, id(scope)) not in others]


def _audience(test: ast.AST) -> str | None:
    """"main" for `accelerator.is_main_process`, "others" for its negation."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return "others" if _audience(test.operand) == "main" else None
    if isinstance(test, ast.Attribute) and test.attr in _MAIN_TESTS and last(dotted(test.value) or "") == "accelerator":
        return "main"
    return None


def _collective(program: Program, call: ast.Call, depth: int, seen: set[str]) -> str | None:
    name = call_name(call) or ""
    if name.startswith("self.") and name.count(".") == 1:
        name = last(name)  # a method of the same class (the file's functions are known by name)
    if isinstance(call.func, ast.Attribute) and call.func.attr in _COLLECTIVES and last(dotted(call.func.value) or "") == "accelerator":
        return f"accelerator.{call.func.attr}()"
    if depth == 0 or name not in program.functions or name in seen:
        return None
    for definition in program.functions[name]:
        for inner in (n for n in ast.walk(definition) if isinstance(n, ast.Call)):
            found = _collective(program, inner, depth - 1, seen | {name})
            if found:
                return f"{name}() → {found}"
    return None
