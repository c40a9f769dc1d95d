"""Helpers of files the run only reads that write files among other work.

stargan-v2's `utils.debug_image(nets_ema, args, inputs, step)` runs the networks on a
batch and saves sample grids (`vutils.save_image`, through `save_image`): called by every
process, N processes write the same pictures at once, each from its own share of the
data. A helper that does nothing but write is project/writers.py's, gated at its calls;
this one does more, so only its caller can say whether the rest may run on the main
process alone: the call is named (AM517), left as written. In a file the run writes, AM517
names the write itself. Read with `ast`, through the run's own calls, a few levels down:
a function that returns nothing, sets or changes nothing outside itself (`model.eval()`
on a model handed in) and neither trains nor talks to the other processes, and that writes
a file or calls one of the run's functions that do.
"""

from __future__ import annotations

import ast
import os

from migrator.analysis.only_writes import ModuleWriters, elements, only_writes, opens_for_writing
from migrator.project.dir_makers import guarded_walk
from migrator.project.index import FileIndex, chain, trees_mentioning

# qualified writer → the position of the path it writes
_WRITERS = {
    "torchvision.utils.save_image": 1, "matplotlib.pyplot.savefig": 0, "numpy.save": 0, "numpy.savez": 0,
    "numpy.savez_compressed": 0, "numpy.savetxt": 0, "torch.save": 1,
    "imageio.imwrite": 0, "imageio.mimsave": 0, "cv2.imwrite": 0, "ffmpeg.output": 1,  # stargan-v2's save_video
    "scipy.io.savemat": 0,
}
# what a helper that may run on one process alone does not do
_TRAINS = {"backward", "step", "zero_grad"}
_TALKS = ("torch.distributed.", "accelerate.")
# methods that change the object they are called on (`model.eval()`, `history.append(...)`,
# `x.add_(1)`: every name ending in `_`): on what a caller handed in, the others would miss it
_CHANGES = {
    "eval", "train", "load_state_dict", "apply", "append", "extend", "insert", "update", "pop", "clear",
    "setdefault", "register_buffer", "add_module",
}


def output_writer_calls(
    sources: dict[str, bytes], files: dict[str, FileIndex], read_only: frozenset[str],
) -> dict[str, tuple[tuple[str, str], ...]]:
    """For each file the run writes: its calls of functions of files it only reads that
    write files among other work, as (spelling, where the write is, relative to the
    caller's folder)."""
    bodies: dict[tuple[str, str], tuple[ast.FunctionDef, ModuleWriters]] = {}
    trainers: set[tuple[str, str]] = set()
    for path, tree, _ in trees_mentioning(sources, files, (b"save", b"open(", b"backward", b"step(", b"distributed")):
        module = ModuleWriters(tree)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and _keeps_to_itself(node, module, items=True):
                bodies[(path, node.name)] = (node, module)
            elif isinstance(node, ast.FunctionDef) and _trains(node, module):
                trainers.add((path, node.name))
    # (file, name) -> (write, its file, line, (file, line) of an item it changes in what it is handed, or None)
    writes: dict[tuple[str, str], tuple] = {}
    for key, (node, module) in bodies.items():
        found = _write(node, module)
        if found is not None:
            changed = _item_changed(node)
            writes[key] = (found[0], key[0], found[1], (key[0], changed) if changed else None)
    for _ in range(3):  # through the run's own calls: debug_image → translate_and_reconstruct → save_image
        for (path, name), (node, _) in bodies.items():
            if (path, name) in writes:
                continue
            targets = {c.spelling: c.target for c in files[path].calls}
            for call in (n for n, guarded in guarded_walk(node, False) if not guarded and isinstance(n, ast.Call)):
                spelling = chain(call.func) or ""
                target = (path, spelling) if (path, spelling) in bodies else targets.get(spelling)
                if target in writes and target != (path, name):
                    changed = _item_changed(node)
                    writes[(path, name)] = (*writes[target][:3], (path, changed) if changed else writes[target][3])
                    break
    out: dict[str, set[tuple[str, str]]] = {}
    for path, f in files.items():
        if path in read_only:
            continue
        for call in f.calls:
            target = call.target
            if target not in writes or target[0] not in read_only or target[0] == path or call.main_only or call.has_star:
                continue
            node, module = bodies[target]
            if _calls_any(node, target[0], files, trainers) or only_writes(node, module) is not None:
                continue  # trains through another of the run's functions, or only writes (project/writers.py)
            write, where, line, changed = writes[target]
            shown = os.path.relpath(where, os.path.dirname(path) or ".").replace(os.sep, "/")
            also = ""
            if changed is not None:
                place = os.path.relpath(changed[0], os.path.dirname(path) or ".").replace(os.sep, "/")
                also = f" and changes in place an array it is handed ({place}:{changed[1]})"
            out.setdefault(path, set()).add((call.spelling, f"`{write}` ({shown}:{line}){also}"))
    return {path: tuple(sorted(calls)) for path, calls in out.items()}


def _keeps_to_itself(function: ast.FunctionDef, module: ModuleWriters, items: bool = False) -> bool:
    """Returns nothing, sets nothing but its own names, and neither trains nor talks to
    the other processes: on the main process alone it changes nothing the others need,
    and waits for none of them. With `items`, items of arrays it is handed may change
    (human-pose-estimation's save_batch_image_with_joints shifts `joint[0]` to draw it):
    told at the call (`_item_changed`)."""
    for node in ast.walk(function):
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal, ast.Await)):
            return False
        if isinstance(node, ast.Return) and node.value is not None:
            return False
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if not all(isinstance(n, ast.Name) or items and _item_of_a_name(n) for t in targets for n in elements(t)):
                return False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _changes(node.func, function):
            return False
    return not _trains(function, module)


def _item_of_a_name(target: ast.expr) -> bool:
    """`joint[0]`, `grid[y, x]`: an item of something a name holds."""
    return isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)


def _item_changed(function: ast.FunctionDef) -> int:
    """The line of the first item the function sets in what it is handed (0: none): an
    item of a parameter, or of a name bound to a part of one (`joints = batch_joints[k]`,
    `for joint in zip(joints, ...)`); not of an array it makes itself."""
    handed = {a.arg for a in function.args.args + function.args.kwonlyargs}
    nodes = sorted((n for n in ast.walk(function) if isinstance(n, (ast.Assign, ast.AugAssign, ast.For))), key=lambda n: n.lineno)
    for node in nodes:
        if isinstance(node, ast.For) and _part_of(node.iter, handed):
            handed |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Assign) and _part_of(node.value, handed):
            handed |= {n.id for t in node.targets for n in elements(t) if isinstance(n, ast.Name)}
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_item_of_a_name(n) and n.value.id in handed for t in targets for n in elements(t)):
                return node.lineno
    return 0


def _part_of(expr: ast.expr, handed: set[str]) -> bool:
    """`batch_joints`, `batch_joints[k]`, `zip(joints, joints_vis)`: the object itself or a view of it."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("zip", "enumerate", "reversed"):
        return any(_part_of(a, handed) for a in expr.args)
    while isinstance(expr, (ast.Subscript, ast.Attribute)):
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id in handed


def _changes(method: ast.Attribute, function: ast.FunctionDef) -> bool:
    """`model.eval()` or `meter.update(...)` on a parameter, or on something of one."""
    name = method.attr
    if name not in _CHANGES and not (name.endswith("_") and not name.startswith("_")):
        return False
    owner = method.value
    while isinstance(owner, ast.Attribute):
        owner = owner.value
    params = {a.arg for a in function.args.args + function.args.kwonlyargs}
    return isinstance(owner, ast.Name) and owner.id in params


def _trains(function: ast.FunctionDef, module: ModuleWriters) -> bool:
    """`loss.backward()`, `optimizer.step()`, or a call of torch.distributed."""
    return any(
        isinstance(node, ast.Call) and (
            isinstance(node.func, ast.Attribute) and node.func.attr in _TRAINS
            or (module.qualify(node.func) or "").startswith(_TALKS)
        )
        for node in ast.walk(function)
    )


def _write(function: ast.FunctionDef, module: ModuleWriters) -> tuple[str, int] | None:
    """The first file the function writes on every call (not under a test of the process):
    an image, figure, array or checkpoint saved, or a file opened for writing."""
    for node, guarded in guarded_walk(function, False):
        if guarded or not isinstance(node, ast.Call):
            continue
        qualified = module.qualify(node.func) or ""
        if qualified in _WRITERS:
            return f"{chain(node.func) or qualified}(...)", node.lineno
        if qualified in ("open", "builtins.open") and opens_for_writing(node):
            return "open(..., 'w')", node.lineno
    return None


def _calls_any(function: ast.FunctionDef, path: str, files: dict[str, FileIndex], trainers: set) -> bool:
    """Calls one of the run's functions that trains or talks to the other processes."""
    targets = {c.spelling: c.target for c in files[path].calls}
    for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
        spelling = chain(call.func) or ""
        if (path, spelling) in trainers or targets.get(spelling) in trainers:
            return True
    return False

