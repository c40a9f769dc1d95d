"""Optional parameters no call of the run passes.

pytorch-retinanet's `csv_eval.evaluate(..., save_path=None)` draws its precision-recall
curves under `if save_path != None:`; train.py and csv_validation.py call it without a
`save_path`, so in this run the block never runs, and a finding on its `plt.savefig` names
a write that does not happen. The rules that name writes in code other files run skip
such a block (`Config.project_unpassed`). Read with `ast`: a function counts only when
every use of its name in the run is a call whose arguments can be read (no `*args`, no
`**kwargs`, not handed on as a value).
"""

from __future__ import annotations

import ast

from migrator.project.index import FileIndex, parameter_defaults


def unpassed_params(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file of the run: `function.parameter` for its top-level functions'
    parameters whose default is None and that no call in the run passes."""
    out: dict[str, tuple[str, ...]] = {}
    for path in files:
        try:
            tree = ast.parse(sources[path])
        except (SyntaxError, ValueError, KeyError):
            continue
        optional = {n.name: params for n in tree.body if isinstance(n, ast.FunctionDef) and (params := _optional(n))}
        if not optional:
            continue
        found = []
        for name, params in sorted(optional.items()):
            calls = _calls_here(tree, name)
            if calls is None or any((path, name) in other.values for other in files.values()):
                continue
            elsewhere = [c for other in files.values() for c in other.calls if c.target == (path, name)]
            if any(c.has_star for c in elsewhere) or not calls and not elsewhere:
                continue
            positional = _positional(tree, name)
            passed = set()
            for call in calls:
                passed |= {k.arg for k in call.keywords} | set(positional[: len(call.args)])
            for c in elsewhere:
                passed |= {k for k, _ in c.keywords} | set(positional[: len(c.args)])
            found += [f"{name}.{p}" for p in params if p not in passed]
        if found:
            out[path] = tuple(found)
    return out


def _optional(function: ast.FunctionDef) -> list[str]:
    """The parameters of `function` whose default is None."""
    return [name for name, d in parameter_defaults(function).items() if isinstance(d, ast.Constant) and d.value is None]


def _positional(tree: ast.Module, name: str) -> list[str]:
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return [a.arg for a in [*function.args.posonlyargs, *function.args.args]]


def _calls_here(tree: ast.Module, name: str) -> list[ast.Call] | None:
    """The calls of `name` in its own file; None when the name is used otherwise (handed
    on, bound again) or called with `*args`/`**kwargs`."""
    calls, funcs = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                return None
            calls.append(node)
            funcs.add(id(node.func))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and id(node) not in funcs:
            return None
    return calls
