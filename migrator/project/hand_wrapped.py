"""Attributes of the run's classes holding models another file wraps in DataParallel.

pytorch-CycleGAN-and-pix2pix's CycleGANModel binds `self.netG_A = networks.define_G(...)`,
which returns `init_net(...)`, which wraps the network in `torch.nn.DataParallel` (AM210
asks for that wrap to go: prepare() wraps the model). Its base class, BaseModel of another
file, saves each net with `torch.save(net.module.cpu().state_dict(), path)` after `net =
getattr(self, "net" + name)`: once the wrap goes, that `.module` fails on any process
count, and nothing said so (reader R9, thirtieth session). AM211 names such reads.
"""

from __future__ import annotations

import ast
import os

from migrator.analysis.ast_imports import qualify
from migrator.project.index import FileIndex, ancestors, chain, parsed, trees_mentioning

_WRAPPERS = {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel"}


def hand_wrapped_attributes(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, str], ...]]:
    """For each file: the attributes (`self.netG_A`) its classes hold, or classes of other
    files built on them bind, to what a function of the run returns wrapped in DataParallel,
    with where the wrap is (relative to that file)."""
    wrapping = _wrapping_functions(sources, files)
    if not wrapping:
        return {}
    held: dict[tuple[str, str], set[tuple[str, str]]] = {}  # (file, class) -> (attribute, where the wrap is)
    for path, f in files.items():
        targets = {c.spelling: c.target for c in f.calls if c.target in wrapping}
        tree = parsed(sources.get(path, b"")) if targets else None
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)) if tree is not None else ():
            for node in ast.walk(cls):
                if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                    continue
                target = targets.get(chain(node.value.func) or "")
                for bound in node.targets if target is not None else ():
                    if isinstance(bound, ast.Attribute) and isinstance(bound.value, ast.Name) and bound.value.id == "self":
                        held.setdefault((path, cls.name), set()).add((bound.attr, wrapping[target]))
    out: dict[str, set[tuple[str, str]]] = {}
    for (path, cls), attributes in held.items():
        for owner in {(path, cls)} | ancestors(files, files[path].bases.get(cls, ())):
            out.setdefault(owner[0], set()).update(
                (attr, _relative(where, owner[0])) for attr, where in attributes
            )
    return {path: tuple(sorted(found)) for path, found in out.items()}


def wrapping_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file: its calls of other files' functions that return a model they wrap in
    DataParallel (`networks.define_G(...)`): prepared as they come, a DataParallel would run
    inside the DDP wrap (AM955 leaves such a migration as written)."""
    wrapping = _wrapping_functions(sources, files)
    out = {
        path: tuple(sorted({c.spelling for c in f.calls if c.target in wrapping and c.target[0] != path}))
        for path, f in files.items()
    }
    return {path: calls for path, calls in out.items() if calls}


def _wrapping_functions(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[tuple[str, str], str]:
    """(file, function) → "file:line" of the wrap, for the run's top-level functions that
    return a model they wrap in DataParallel (`net = torch.nn.DataParallel(net, gpu_ids)`,
    `return net`), or what such a function returns (`return init_net(net, ...)`)."""
    out: dict[tuple[str, str], str] = {}
    for path, tree, imports in trees_mentioning(sources, files, (b"DataParallel",)):
        for node in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
            wraps = {
                t.id: n.value.lineno for n in ast.walk(node) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                and qualify(n.value.func, imports) in _WRAPPERS for t in n.targets if isinstance(t, ast.Name)
            }
            returns = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None]
            line = next((wraps[r.id] for r in returns if isinstance(r, ast.Name) and r.id in wraps), None)
            if line is not None:
                out[(path, node.name)] = f"{path}:{line}"
    for path, f in files.items():  # `define_G(...)`: `return init_net(net, ...)`
        tree = parsed(sources.get(path, b"")) if any(c.target in out for c in f.calls) or any(p == path for p, _ in out) else None
        targets = {c.spelling: c.target for c in f.calls} | {name: (path, name) for p, name in out if p == path}
        for node in (n for n in tree.body if isinstance(n, ast.FunctionDef)) if tree is not None else ():
            returns = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and isinstance(n.value, ast.Call)]
            for spelling in (chain(r.func) or "" for r in returns):
                if targets.get(spelling) in out and (path, node.name) not in out:
                    out[(path, node.name)] = out[targets[spelling]]
    return out


def _relative(where: str, path: str) -> str:
    file, line = where.rsplit(":", 1)
    return f"{os.path.relpath(file, os.path.dirname(path) or '.').replace(os.sep, '/')}:{line}"
