"""What a migrated caller passes at each call of a threaded function: the Accelerator,
and for every argument whether it is prepared (with its role), the Accelerator's device,
or something else."""

from __future__ import annotations

import ast
from typing import Callable

from migrator.findings import FileResult, FileStatus, is_refusal
from migrator.project.index import ACCELERATOR, FileIndex
from migrator.verify.program import Program



def check_caller(f: FileIndex, threaded, result: FileResult, prepared, loader_calls=(), plain=frozenset()) -> set[tuple[str, str]]:
    """The threaded functions this caller does not pass the Accelerator to at every call
    (all of them when the result failed or was not migrated). Fills `prepared` with what
    each call passes: parameter → "prepared:<role>" / "device" / "device:torch" (a torch.device before too) / "whole:dataloader" (a loader
    not prepared where it is passed) / "other". `plain`: threaded
    functions that take no Accelerator (their migration needs none), only prepared
    arguments."""
    mine = {c.target for c in f.calls if c.target in threaded}
    if result.status is FileStatus.FAILED or result.after is None or any(is_refusal(x.code) for x in result.findings):
        return mine  # unchanged is fine: its calls may pass the Accelerator since an earlier run
    try:
        tree = ast.parse(result.after)
    except SyntaxError:
        return mine
    roles = _roles(result.after, dict(loader_calls))
    before = Program.parse(result.before or "")
    was_torch_device = before.is_torch_device if before is not None else (lambda name: False)
    spelled = {c.spelling: c.target for c in f.calls if c.target in threaded}
    dropped, found = set(), set()
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    flat = _prepared_names(ast.walk(tree))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        spelling = spelling_of(node.func)
        if spelling not in spelled:
            continue
        target = spelled[spelling]
        if target not in plain and not any(k.arg == ACCELERATOR for k in node.keywords):
            dropped.add(target)
            continue
        found.add(target)
        prepared.setdefault(target, []).append(_call_kinds(node, parents, flat, roles, was_torch_device))
    _instance_calls(f, threaded, tree, parents, flat, roles, prepared, was_torch_device)
    return dropped | (mine - found)


def _instance_calls(f: FileIndex, threaded, tree: ast.Module, parents, flat, roles, prepared, was_torch_device) -> None:
    """What the calls of instances of threaded classes pass their methods (`es(score,
    model)`: `EarlyStopping.__call__`), under (file, "Class.method"): the callers' stub makes
    the same calls, so the class's migration sees which parameters are prepared."""
    instances = {name: target for name, target in f.instances.items() if target in threaded}
    if not instances:
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        spelling = spelling_of(node.func)
        if spelling in instances:
            (path, cls), method = instances[spelling], "__call__"
        elif isinstance(node.func, ast.Attribute) and spelling_of(node.func.value) in instances:
            (path, cls), method = instances[spelling_of(node.func.value)], node.func.attr
        else:
            continue
        prepared.setdefault((path, f"{cls}.{method}"), []).append(_call_kinds(node, parents, flat, roles, was_torch_device))


def _call_kinds(node: ast.Call, parents, flat, roles, was_torch_device: Callable[[str], bool]) -> dict[object, str]:
    """What the call passes each parameter, and whether only the main process makes it."""
    kinds = _kinds(node, _Scopes(node, parents, flat), roles, was_torch_device)
    kinds[MAIN_ONLY] = "main" if _under_main_process(node, parents) else "every"
    return kinds


# The key of a call's kinds that says whether only the main process makes the call.
MAIN_ONLY = "<main only>"
# The kind of an argument that becomes the Accelerator's device and was a torch.device already.
TORCH_DEVICE = "device:torch"


def _under_main_process(call: ast.Call, parents: dict[int, ast.AST]) -> bool:
    """The call sits in the body of `if accelerator.is_main_process:`: the function it calls
    runs on one process, so its migration must not add a collective (a barrier there waits
    for processes that never come)."""
    child, node = call, parents.get(id(call))
    while node is not None:
        if isinstance(node, ast.If) and child in node.body:
            test = node.test
            if isinstance(test, ast.Attribute) and test.attr in ("is_main_process", "is_local_main_process"):
                return True
        child, node = node, parents.get(id(node))
    return False


def spelling_of(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return None


class _Scopes:
    """What a name passed at `call` is, looked up from the call's own function outwards:
    the innermost scope that binds it decides (a `loader` prepared in `main()` is not the
    `loader` another function builds for itself)."""

    def __init__(self, call: ast.Call, parents: dict[int, ast.AST], flat: tuple[set[str], set[str]], depth: int = 0) -> None:
        self.flat = flat  # for a parameter: what the name is where the file prepares it
        self.line, self.parents, self.depth = call.lineno, parents, depth
        self.chain = []
        node = parents.get(id(call))
        while node is not None:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                self.chain.append(node)
            node = parents.get(id(node))

    def kind(self, name: str) -> str | None:
        for scope in self.chain:
            own = list(_own_nodes(scope))
            if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in own):
                earlier = [n for n in own if getattr(n, "lineno", 0) < self.line]
                prepared, devices = _prepared_names(earlier)
                built = _built_before(earlier, name, self.parents)
                if name in prepared or name in _prepared_names(own)[0] and not built or self._returned_prepared(earlier, name):
                    return "prepared"
                return "device" if name in devices else "whole" if built else "other"
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and name in {
                a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg)
            }:
                handed = self._handed(scope, name)
                if handed is not None:
                    return handed
                prepared, devices = self.flat  # passed in (AM002 threads such helpers from the set-up)
                return "prepared" if name in prepared else "device" if name in devices else "other"
        return None

    def _handed(self, function: ast.FunctionDef, param: str) -> str | None:
        """What the file's own calls of `function` hand `param`, when they all agree that
        it is prepared or left whole (`train(train_loader, val_loader)` in `__main__`
        with the loaders `load_dataset()` built); None when there is no such call, they
        disagree, or it is something else."""
        module = self.chain[-1] if self.chain and isinstance(self.chain[-1], ast.Module) else None
        positional = [a.arg for a in function.args.args]
        if module is None or self.depth >= 3 or param not in positional + [a.arg for a in function.args.kwonlyargs]:
            return None
        kinds = set()
        for call in ast.walk(module):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == function.name):
                continue
            given = next((k.value for k in call.keywords if k.arg == param), None)
            if given is None and param in positional and positional.index(param) < len(call.args):
                given = call.args[positional.index(param)]
            if not isinstance(given, ast.Name):
                return None
            kinds.add(_Scopes(call, self.parents, self.flat, self.depth + 1).kind(given.id))
        return kinds.pop() if len(kinds) == 1 and kinds <= {"prepared", "whole"} else None


    def _returned_prepared(self, nodes, name: str) -> bool:
        """`model = train(...)` above the call, where `train`, a function of this file,
        returns what it prepared: the caller holds the prepared model."""
        module = self.chain[-1] if self.chain and isinstance(self.chain[-1], ast.Module) else None
        for node in nodes:
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)):
                continue
            if any(isinstance(n, ast.Name) and n.id == name for t in node.targets for n in ast.walk(t)):
                if module is not None and _returns_prepared(module, node.value.func.id):
                    return True
        return False


def _returns_prepared(module: ast.Module, function: str) -> bool:
    """The top-level function `function` returns a name it binds from a prepare() call."""
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            own = list(_own_nodes(node))
            prepared = _prepared_names(own)[0]
            for r in own:
                value = r.value if isinstance(r, ast.Return) else None
                returned = value.elts if isinstance(value, ast.Tuple) else [value]
                if any(isinstance(v, ast.Name) and v.id in prepared for v in returned):
                    return True
    return False


def _own_nodes(scope: ast.AST):
    """The nodes of `scope`'s body, not those of functions or classes nested in it."""
    stack = list(scope.body) if hasattr(scope, "body") else []
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _built_before(nodes, name: str, parents: dict[int, ast.AST], depth: int = 0) -> bool:
    """Every binding of `name` among `nodes` (those above the call) is `name = f(...)`,
    none a prepare(), and there is one: the call hands over an object not prepared yet
    (`class_weights(train_loader)` above `... = accelerator.prepare(..., train_loader)`)."""
    values = []
    for node in nodes:
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            statement = parents.get(id(node))
            while isinstance(statement, (ast.Tuple, ast.List, ast.Starred)):
                statement = parents.get(id(statement))
            values.append(statement.value if isinstance(statement, ast.Assign) else None)

    def built(value) -> bool:
        if isinstance(value, ast.Name) and value.id != name and depth < 2:  # `a, b = loaders` unpacked
            return _built_before(nodes, value.id, parents, depth + 1)
        return isinstance(value, ast.Call) and not (isinstance(value.func, ast.Attribute) and value.func.attr == "prepare")

    return bool(values) and all(built(v) for v in values)


def _prepared_names(nodes) -> tuple[set[str], set[str]]:
    """Names bound from `accelerator.prepare(...)`, and names bound to `accelerator.device`."""
    prepared, devices = set(), set()
    for node in nodes:
        if not isinstance(node, ast.Assign):
            continue
        targets = [e for t in node.targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "prepare":
            prepared.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(value, ast.Attribute) and value.attr == "device" and spelling_of(value.value) == ACCELERATOR:
            devices.update(t.id for t in targets if isinstance(t, ast.Name))
    return prepared, devices


def _roles(text: str, loader_calls: dict[str, tuple[int, ...]]) -> dict[str, str]:
    """The roles the caller's own analysis gives its names (model, optimizer, ...)."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper

    from migrator.analysis import analyze

    analysis = analyze(MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True), loader_calls=loader_calls)
    return {name: role.name.lower() for name, role in analysis.roles.roles.items()}


def _kinds(call: ast.Call, scopes: _Scopes, roles: dict[str, str], was_torch_device: Callable[[str], bool]) -> dict[object, str]:
    def kind(value: ast.AST) -> str:
        if isinstance(value, ast.Attribute) and value.attr == "device" and spelling_of(value.value) == ACCELERATOR:
            return "device"
        found = scopes.kind(value.id) if isinstance(value, ast.Name) else None
        if found == "device" and was_torch_device(value.id):
            return TORCH_DEVICE  # a torch.device before the migration too (lufficc/SSD's train.py)
        if found == "prepared":
            return f"prepared:{roles.get(value.id, '')}"
        if found == "whole" and roles.get(value.id) == "dataloader":
            return "whole:dataloader"  # a loader the caller has not prepared (yet)
        return found if found == "device" else "other"

    out: dict[object, str] = {i: kind(a) for i, a in enumerate(call.args)}
    out.update({k.arg: kind(k.value) for k in call.keywords if k.arg and k.arg != ACCELERATOR})
    return out
