"""Experiment writers handed to another file's function, alone or in a dict.

human-pose-estimation's train.py builds `writer_dict = {'writer': SummaryWriter(log_dir=...),
...}` and hands it to `train(...)` and `validate(...)` of lib/core/function.py, which log
with `writer = writer_dict['writer']`, `writer.add_scalar(...)`. AM520 tells train.py to
make the writer on the main process only and to guard its uses: those uses are in the
other file, where nothing said so, and where the other processes would then fail (reader
R14, thirty-first session).
"""

from __future__ import annotations

import ast
import os

from migrator.analysis.ast_imports import module_imports, qualify
from migrator.project.index import FileIndex, parsed

# the writers AM520 asks to make on the main process only
WRITERS = {
    "torch.utils.tensorboard.SummaryWriter", "torch.utils.tensorboard.writer.SummaryWriter", "tensorboardX.SummaryWriter",
    "tensorboard_logger.Logger", "visdom.Visdom",
}


def handed_loggers(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, str, str, str], ...]]:
    """For each file: (function, parameter, key or "", where the writer is made, relative to
    that file) for the parameters of its top-level functions that a caller of another file
    hands a writer, or a dict holding one under `key`."""
    out: dict[str, set[tuple[str, str, str, str]]] = {}
    for path, f in files.items():
        calls = [c for c in f.calls if c.target[0] != path and not c.has_star]
        tree = parsed(sources.get(path, b"")) if calls and b"Writer" in sources.get(path, b"") else None
        if tree is None:
            continue
        made = _writers_bound(tree)
        for call in calls:
            owner = files.get(call.target[0])
            function = owner.functions.get(call.target[1]) if owner is not None else None
            if function is None or function.is_class:
                continue
            given = list(zip(function.params, call.args)) + [(k, v) for k, v in call.keywords if k in function.params]
            for param, name in given:
                for key, line in made.get(name or "", ()):
                    where = f"{os.path.relpath(path, os.path.dirname(call.target[0]) or '.').replace(os.sep, '/')}:{line}"
                    out.setdefault(call.target[0], set()).add((call.target[1], param, key, where))
    return {path: _first_of_each(found) for path, found in out.items()}


def _first_of_each(found: set[tuple[str, str, str, str]]) -> tuple[tuple[str, str, str, str], ...]:
    """One entry per (function, parameter, key): a writer made in two branches is one writer."""
    kept: dict[tuple[str, str, str], tuple[str, str, str, str]] = {}
    for entry in sorted(found):
        kept.setdefault(entry[:3], entry)
    return tuple(kept.values())


def _writers_bound(tree: ast.Module) -> dict[str, list[tuple[str, int]]]:
    """Names bound to a writer (key "") or to a dict literal holding one under a string key.
    A name also bound to None is a writer some runs do without (3D-ResNets' `tb_writer`,
    made `if opt.tensorboard and opt.is_master_node`, None otherwise): the functions handed
    it already test it, and the caller's own AM520 says whether it is made on every process."""
    imports = module_imports(tree)
    out: dict[str, list[tuple[str, int]]] = {}
    optional = {
        node.targets[0].id for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant) and node.value.value is None
    }
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if name in optional:
            continue
        if _writer(value, imports):
            out.setdefault(name, []).append(("", value.lineno))
        elif isinstance(value, ast.Dict):
            for key, item in zip(value.keys, value.values):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and _writer(item, imports):
                    out.setdefault(name, []).append((key.value, item.lineno))
    return out


def _writer(expr: ast.expr, imports: dict[str, str]) -> bool:
    return isinstance(expr, ast.Call) and qualify(expr.func, imports) in WRITERS
