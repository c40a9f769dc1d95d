"""Functions of the run that read attributes of what they are handed beyond torch.nn.Module's.

pytorch-a2c-ppo-acktr's evaluation.py: `evaluate(actor_critic, ...)` calls
`actor_critic.act(...)` and reads `actor_critic.recurrent_hidden_state_size`. Handed a
prepared model (a DistributedDataParallel wrapper on N processes), it fails there: the
wrapper has torch.nn.Module's attributes only. The caller, which knows the model is
prepared, is told (AM205).
"""

from __future__ import annotations

import ast
import os

from migrator.project.index import FileIndex, top_level_function
from migrator.torch_api import MODULE_API


def model_attribute_readers(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, int, str, str, str, bool], ...]]:
    """For each file: its calls of other files' top-level functions that read an attribute
    of a parameter beyond torch.nn.Module's (`actor_critic.act`), as (spelling, position of
    the parameter, parameter, attribute, where it is read relative to the caller, whether
    the function trains: a `.backward()`, `.zero_grad()` or an optimizer's `.step()` in it)."""
    reads: dict[tuple[str, str], tuple[dict[str, tuple[str, int]], bool]] = {}  # each function read once
    out: dict[str, set[tuple[str, int, str, str, str, bool]]] = {}
    for path, f in files.items():
        for call in f.calls:
            target = call.target
            function = files[target[0]].functions.get(target[1]) if target[0] in files and target[0] != path else None
            if function is None or function.is_class or call.has_star:
                continue
            if target not in reads:
                function_tree = top_level_function(sources.get(target[0], b""), target[1])
                reads[target] = (_attributes_read(function_tree), _trains(function_tree))
            attributes, trains = reads[target]
            for param, (attr, line) in attributes.items():
                position = function.params.index(param) if param in function.params else -1
                where = f"{os.path.relpath(target[0], os.path.dirname(path) or '.').replace(os.sep, '/')}:{line}"
                out.setdefault(path, set()).add((call.spelling, position, param, attr, where, trains))
    return {path: tuple(sorted(found)) for path, found in out.items()}


# torch.nn.Module's API, and DDP's `module` (read where the code knows of the wrapper:
# `if isinstance(model, DistributedDataParallel): model = model.module`)
_WRAPPER_AWARE = MODULE_API | {"module"}


def _trains(function: ast.FunctionDef | None) -> bool:
    """A `.backward()`, `.zero_grad()`, or a `.step()` given nothing (an optimizer's or a
    scheduler's: an environment's `envs.step(action)` takes the actions)."""
    return function is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and (
            n.func.attr in ("backward", "zero_grad") or n.func.attr == "step" and not n.args and not n.keywords
        )
        for n in ast.walk(function)
    )


def _attributes_read(function: ast.FunctionDef | None) -> dict[str, tuple[str, int]]:
    """Parameter → the first attribute the function reads of it beyond torch.nn.Module's."""
    if function is None:
        return {}
    params = {a.arg for a in function.args.args + function.args.kwonlyargs}
    found: dict[str, tuple[str, int]] = {}
    for node in sorted((n for n in ast.walk(function) if isinstance(n, ast.Attribute)), key=lambda n: (n.lineno, n.col_offset)):
        if isinstance(node.value, ast.Name) and node.value.id in params and node.attr not in _WRAPPER_AWARE and not node.attr.startswith("__"):
            found.setdefault(node.value.id, (node.attr, node.lineno))
    return found
