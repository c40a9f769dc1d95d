"""Methods of the run's objects, called through a parameter of another file's function.

human-pose-estimation's train.py builds `valid_dataset = eval('dataset.' + name)(...)`, one
of the data set classes of lib/dataset/, and hands it to `validate(config, valid_loader,
valid_dataset, ...)` of lib/core/function.py, which calls `val_dataset.evaluate(...)`. That
`evaluate` writes its results and reads them back, on every launched process; as no call
named the method, its file counted as code nobody runs, and its writes went unnamed
(reader R10, thirtieth session). These calls make the methods code other files run.
"""

from __future__ import annotations

import ast

from migrator.project.index import FileIndex, parsed, top_level_function


def handed_instance_methods(
    sources: dict[str, bytes], path: str, f: FileIndex, files: dict[str, FileIndex], instances: dict[str, tuple[str, str]],
) -> set[tuple[tuple[str, str], str]]:
    """((file, class), method) for each `param.method(...)` in a function of another file
    that this file calls handing `param` an instance of the run's classes: of one class
    (`instances`), or of any of the classes a module holds when it is picked by name there
    (FileIndex.picked). Only a class that defines the method itself counts."""
    made = {name: (target,) for name, target in instances.items()}
    made.update(f.picked)
    if not made:
        return set()
    found = set()
    for call in f.calls:
        owner = files.get(call.target[0])
        function = owner.functions.get(call.target[1]) if owner is not None and call.target[0] != path else None
        if function is None or function.is_class or call.has_star or call.main_only:
            continue
        handed = {param: made[arg] for param, arg in zip(function.params, call.args) if arg in made}
        handed.update({key: made[arg] for key, arg in call.keywords if arg in made and key in function.params})
        body = top_level_function(sources.get(call.target[0], b""), call.target[1]) if handed else None
        for node in ast.walk(body) if body is not None else ():
            func = node.func if isinstance(node, ast.Call) else None
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in handed:
                found |= {(cls, func.attr) for cls in handed[func.value.id] if func.attr in _methods(sources, cls)}
    return found


def _methods(sources: dict[str, bytes], cls: tuple[str, str]) -> set[str]:
    tree = parsed(sources.get(cls[0], b""))
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls[1]), None) if tree is not None else None
    return {m.name for m in node.body if isinstance(m, ast.FunctionDef)} if node is not None else set()
