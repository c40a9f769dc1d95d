"""Evaluations of the run that keep all the data: their share-of-the-data findings go.

An evaluation function of the run left without the Accelerator (a caller outside the run,
outputs it returns whole) reads, at every call, a loader its caller left out of prepare():
it sees the whole data set on every process and its sums are global. The findings the
engine file gets for such a function on its own (AM913 "once its loader is prepared",
AM513 "counts only this process's share") describe a run that does not happen; the
caller's AM914 says what the run did instead.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from migrator.findings import FileResult
from migrator.project.index import FileIndex

# What a loader prepared under the function would make it miss.
_SHARE_CODES = frozenset({"AM503", "AM513", "AM514", "AM515", "AM522", "AM913"})


def evaluations_left_whole(
    files: dict[str, FileIndex], results: dict[str, FileResult], threaded: frozenset[tuple[str, str]],
    read: dict[str, str] | None = None,
) -> dict[str, frozenset[str]]:
    """Engine path → its evaluation functions and classes (no backward, no step) left unthreaded that
    every caller in the run hands only loaders it did not prepare (read in the migrated
    caller: a loader may be handed as it was before prepare(), under another name; in a
    file the run only reads (`read`: path → text), as it stands once it prepares: one
    that does not is still to be migrated, and may prepare what it hands over)."""
    settled = {path: _calls_and_prepared(text) for path, text in (read or {}).items()}
    migrated = {path: found for path, found in settled.items() if found[1]}
    migrated |= {path: _calls_and_prepared(r.after) for path, r in results.items()}
    seen: dict[tuple[str, str], bool] = {}
    for caller in files.values():
        for call in caller.calls:
            owner = files.get(call.target[0])
            function = owner.functions.get(call.target[1]) if owner else None
            if function is None or function.updates or call.target in threaded:
                continue
            loaders = {p for p, role in function.param_roles if role == "dataloader"}
            whole = caller.path in migrated and bool(loaders)
            if whole:
                calls, prepared = migrated[caller.path]
                for args, keywords in calls.get(call.spelling, [([], [])]):
                    given = list(zip(function.params, args)) + keywords
                    handed = [name for param, name in given if param in loaders]
                    whole = whole and bool(handed) and not any(n is None or n in prepared for n in handed)
            seen[call.target] = seen.get(call.target, True) and whole
    out: dict[str, set[str]] = {}
    for (path, name), whole in seen.items():
        if whole:
            out.setdefault(path, set()).add(name)
    return {path: frozenset(names) for path, names in out.items()}


def without_share_findings(result: FileResult, functions: frozenset[str]) -> FileResult:
    """`result` less the share-of-the-data findings inside `functions`."""
    try:
        tree = ast.parse(result.after if result.after is not None else result.before or "")
    except SyntaxError:
        return result
    spans = [
        (n.lineno, n.end_lineno or n.lineno) for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name in functions
    ]
    kept = tuple(
        f for f in result.findings
        if not (f.code in _SHARE_CODES and any(a <= f.start.line <= b for a, b in spans))
    )
    return replace(result, findings=kept) if len(kept) != len(result.findings) else result


def _calls_and_prepared(text: str | None):
    """The migrated caller's calls by their spelling ((argument names, keyword names)
    each, None for other expressions), and the names bound from a `prepare(...)` call."""
    try:
        tree = ast.parse(text or "")
    except SyntaxError:
        return {}, set()
    calls: dict[str, list] = {}
    prepared: set[str] = set()

    def name(node: ast.AST) -> str | None:
        return ast.unparse(node) if isinstance(node, (ast.Name, ast.Attribute)) else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            spelling = name(node.func)
            if spelling is not None:
                calls.setdefault(spelling, []).append(
                    ([name(a) for a in node.args], [(k.arg, name(k.value)) for k in node.keywords if k.arg])
                )
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and func.attr == "prepare":
                for target in node.targets:
                    prepared |= {ast.unparse(n) for n in ast.walk(target) if isinstance(n, (ast.Name, ast.Attribute))}
    return calls, prepared
