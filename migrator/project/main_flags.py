"""Attributes that hold "this is the main process", set from what the callers hand in.

lufficc/SSD's train.py builds `CheckPointer(model, ..., save_to_disk, logger)` after
`save_to_disk = dist_util.get_rank() == 0`, and `CheckPointer.save` begins with `if not
self.save_to_disk: return`: its `torch.save` runs on the main process only. Read alone,
checkpoint.py cannot know what the flag means; every call of the class in the run says it.
"""

from __future__ import annotations

import ast

from migrator.project.index import FileIndex, chain, parsed

# names (last dotted part) that hold a process's rank, and the flags true on the main process
_RANKS = {"rank", "local_rank", "global_rank", "get_rank", "process_index", "local_process_index"}
_MAIN = {"is_main_process", "is_local_main_process", "is_master", "is_main", "is_rank_zero", "is_global_zero"}


def main_flags(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file: the attributes of its classes (`self.save_to_disk`) kept from an
    `__init__` parameter that every call of the class in the run hands a test true on the
    main process only."""
    handed: dict[tuple[str, str], list[bool]] = {}  # (file, "self.attr") -> for each call: a main-process test
    for path, f in files.items():
        classes = [c for c in f.calls if c.target[0] != path and _kept(files, c.target) and not c.has_star]
        tree = parsed(sources.get(path, b"")) if classes else None
        if tree is None:
            continue
        tests = _main_tests(tree)
        for call in classes:
            function = files[call.target[0]].functions[call.target[1]]
            keywords = dict(call.keywords)
            falsy = _falsy_defaults(sources.get(call.target[0], b""), call.target[1])
            for param, attribute in function.kept_params:
                position = function.params.index(param)
                if param not in keywords and position >= len(call.args) and param in falsy:
                    continue  # left out, so None or False: no process passes the test
                given = keywords.get(param) if param in keywords else call.args[position] if position < len(call.args) else None
                handed.setdefault((call.target[0], attribute), []).append(given in tests)
    out: dict[str, set[str]] = {}
    for (path, attribute), calls in handed.items():
        if calls and all(calls):
            out.setdefault(path, set()).add(attribute)
    return {path: tuple(sorted(found)) for path, found in out.items()}


def _falsy_defaults(source: bytes, cls: str) -> set[str]:
    """The parameters of the class's `__init__` that default to None or False."""
    tree = parsed(source)
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None) if tree is not None else None
    init = next((m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None) if node is not None else None
    if init is None:
        return set()
    positional = init.args.args[len(init.args.args) - len(init.args.defaults):]
    pairs = list(zip(positional, init.args.defaults)) + list(zip(init.args.kwonlyargs, init.args.kw_defaults))
    return {a.arg for a, d in pairs if isinstance(d, ast.Constant) and d.value in (None, False)}


def _kept(files: dict[str, FileIndex], target: tuple[str, str]) -> bool:
    owner = files.get(target[0])
    function = owner.functions.get(target[1]) if owner is not None else None
    return function is not None and function.is_class and bool(function.kept_params)


def _main_tests(tree: ast.Module) -> set[str]:
    """Names the file binds, once, to a test true on the main process only
    (`save_to_disk = dist_util.get_rank() == 0`, `is_main = args.local_rank in [-1, 0]`)."""
    bound: dict[str, list[bool]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            bound.setdefault(node.targets[0].id, []).append(_tests_main(node.value))
    return {name for name, tests in bound.items() if len(tests) == 1 and tests[0]}


def _tests_main(expr: ast.expr) -> bool:
    if isinstance(expr, (ast.Name, ast.Attribute)):
        return (chain(expr) or "").rsplit(".", 1)[-1] in _MAIN
    if not (isinstance(expr, ast.Compare) and len(expr.ops) == 1):
        return False
    left, right, op = expr.left, expr.comparators[0], expr.ops[0]
    if _rank(right) and not _rank(left):
        left, right = right, left
    if not _rank(left):
        return False
    if isinstance(op, (ast.Eq, ast.Is)):
        return isinstance(right, ast.Constant) and right.value == 0
    if isinstance(op, ast.In) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
        return {e.value for e in right.elts if isinstance(e, ast.Constant)} in ({0}, {-1, 0})
    return False


def _rank(expr: ast.expr) -> bool:
    """`dist.get_rank()`, `args.local_rank`, `rank`."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    return (chain(expr) or "").rsplit(".", 1)[-1] in _RANKS
