"""Experiment-logger classes of the project, read from what their `__init__` keeps.

StarGAN's logger.py wraps a TensorBoard writer in a class of its own (`self.writer =
tf.summary.FileWriter(log_dir)`), and the solver builds it with `Logger(self.log_dir)`
after `from logger import Logger` inside a method. The solver's own analysis sees a call
of an unknown class; with `Config.project_loggers` naming such calls, AM520 treats them as
the writers they wrap: created and written on the main process only.
"""

from __future__ import annotations

import ast
import os

from migrator.project.index import FileIndex

# Last names of the constructors of a writer of the run's record (AM520's own list
# holds their qualified names).
_WRITERS = {"SummaryWriter", "FileWriter"}


def logger_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file that builds such a class of another file: the calls as spelled there
    (`Logger`, `logger.Logger`), imports inside functions included."""
    trees = {}
    for path in files:
        try:
            trees[path] = ast.parse(sources[path])
        except (SyntaxError, ValueError, KeyError):
            continue
    wrapping = {path: _wrapping_classes(tree) for path, tree in trees.items()}
    by_stem: dict[str, set[str]] = {}
    for path in trees:
        by_stem.setdefault(os.path.splitext(os.path.basename(path))[0], set()).add(path)
    out = {}
    for path, tree in trees.items():
        calls = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                owners = by_stem.get(node.module.rsplit(".", 1)[-1], set()) - {path}
                classes = set().union(*(wrapping[o] for o in owners)) if owners else set()
                calls |= {alias.asname or alias.name for alias in node.names if alias.name in classes}
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    owners = by_stem.get(alias.name.rsplit(".", 1)[-1], set()) - {path}
                    for owner in owners:
                        calls |= {f"{alias.asname or alias.name}.{cls}" for cls in wrapping[owner]}
        if calls:
            out[path] = tuple(sorted(calls))
    return out


# What a class that trains does: it is a trainer keeping a writer, not a logger (SimCLR's
# trainer class keeps a SummaryWriter; building it on the main process only would be wrong).
_TRAINS = {"backward", "step", "zero_grad", "parameters", "train", "eval"}


def _wrapping_classes(tree: ast.Module) -> set[str]:
    """Top-level classes whose `__init__` keeps a writer (`self.x = ...SummaryWriter(...)`)
    and that do nothing else a training class does: no loop, no backward, no step."""
    out = set()
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _TRAINS for n in ast.walk(node)):
            continue
        init = next((m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
        for statement in ast.walk(init) if init is not None else ():
            value = statement.value if isinstance(statement, ast.Assign) else None
            func = value.func if isinstance(value, ast.Call) else None
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            kept = [t.attr for t in statement.targets if isinstance(t, ast.Attribute)] if name in _WRITERS else []
            if kept and _only_logs(node, init, kept[0]):
                out.add(node.name)
    return out


def _only_logs(cls: ast.ClassDef, init: ast.FunctionDef, writer: str) -> bool:
    """No loop, or loops only in methods that each write through the writer and read no
    loader (the image and histogram summaries of a TensorBoard logger loop over what they
    are given; an evaluator keeping a writer loops over its data)."""
    for method in (m for m in cls.body if isinstance(m, ast.FunctionDef) and m is not init):
        if not any(isinstance(n, (ast.For, ast.While)) for n in ast.walk(method)):
            continue
        writes = any(isinstance(n, ast.Attribute) and n.attr == writer for n in ast.walk(method))
        reads_data = any(isinstance(n, (ast.Name, ast.Attribute)) and "loader" in (n.id if isinstance(n, ast.Name) else n.attr).lower() for n in ast.walk(method))
        if not writes or reads_data:
            return False
    return True
