"""Nothing removed, wrapped or retyped is still used the old way.

After prepare() the model may be a DistributedDataParallel wrapper (on N processes) or
the plain module (on one): `.module`, the user's own methods and attributes, and
`state_dict()` keys differ between the two, so code that reaches through the wrapper
works on one process count and breaks on another. A removed DistributedSampler leaves
`set_epoch` behind; a device that was a string is a torch.device after the migration.
"""

from __future__ import annotations

import ast
import re
from typing import Iterator

from migrator.analysis.reach import CALLERS_STUB
from migrator.analysis.wrapped import module_reader_flags
from migrator.verify.pair import Pair, Problem
from migrator.torch_api import MODULE_API
from migrator.verify.program import Program, call_name, dotted, last

CODE = "AM952"

_KEYED = {"state_dict": "its keys gain DDP's `module.` prefix on N processes",
          "load_state_dict": "the wrapper expects keys with DDP's `module.` prefix on N processes",
          "module": "prepare() wraps the model only on N processes, so `.module` fails on one",
          "no_sync": "the model is not wrapped on one process; use `accelerator.no_sync(model)`"}


def check(pair: Pair) -> list[Problem]:
    return (
        list(_wrapped_model_uses(pair)) + list(_orphan_set_epoch(pair)) + list(_device_strings(pair))
        + list(_prepared_model_moved(pair)) + list(_main_only_file_read(pair)) + list(_handed_to_module_readers(pair))
    )


def _handed_to_module_readers(pair: Pair) -> Iterator[Problem]:
    """A prepared model handed to code of another file that reads its `.module` (its
    DataParallel wrap removed here): on one process prepare() leaves the model plain and
    that read fails. Also when that code is migrated with this file (its call passes the
    Accelerator): its migration cannot see the wrap and keeps `.module` as written."""
    after = pair.after
    if not pair.module_readers:
        return
    models = prepared_models(after)
    flags = module_reader_flags(pair.module_readers)
    for call in after.calls:
        spelling = call_name(call)
        if spelling not in flags or flags[spelling] and not _passes_true(call, flags[spelling]):
            continue
        handed = [dotted(a) for a in call.args] + [dotted(k.value) for k in call.keywords]
        model = next((h for h in handed if h in models), None)
        if model is not None:
            yield pair.at_after(
                CODE, call,
                f"left as written: `{spelling}` reads `.module` of the model it is handed, and `{model}` would be "
                "prepared here: prepare() wraps it only on N processes, so on one the plain model has no `.module` and "
                "that code fails (its own migration cannot see the wrap it relied on); read the model there through "
                "`accelerator.unwrap_model(...)` instead of `.module`, then migrate",
            )
            return


def _passes_true(call: ast.Call, flag: str) -> bool:
    """The call hands `flag=` something other than False or None (a reader of `.module`
    that reads it only then: `CheckpointIO(path, data_parallel=True, **nets)`)."""
    value = next((k.value for k in call.keywords if k.arg == flag), None)
    return value is not None and not (isinstance(value, ast.Constant) and not value.value)


# Calls that only mention a path (a message), not touch the file.
_MENTIONS = {"print", "info", "debug", "warning", "error", "log", "format", "write", "join", "exists"}
# Calls that touch files the main process may still be writing, whatever path they get.
_DELETES = {"remove", "unlink", "rmtree", "rename", "replace"}


def _main_only_file_read(pair: Pair) -> Iterator[Problem]:
    """`accelerator.save(state, path)` writes on the main process only; a statement after
    it in the same block that reads `path` (copies, loads, opens it) still runs on every
    process, before the file exists or while it is half-written."""
    program = pair.after
    for call in program.calls:
        if last(call_name(call)) != "save" or not program.is_accelerator(getattr(call.func, "value", None)):
            continue
        if len(call.args) < 2:
            continue
        path = ast.unparse(call.args[1])
        statement = program.statement_of(call)
        body = _block_of(program, statement)
        if body is None or _called_on_main_only(program, call):
            continue
        for later in body[body.index(statement) + 1:]:
            if _barrier(later) or _main_only(later):
                break
            use = next((c for c in ast.walk(later) if isinstance(c, ast.Call) and last(call_name(c)) not in _MENTIONS and (
                any(ast.unparse(a) == path for a in c.args) or last(call_name(c)) in _DELETES)
                and not _under_main_test(program, c, later)), None)
            if use is not None:
                yield pair.at_after(
                    CODE, use,
                    f"left as written: `{call_name(use)}(...)` touches the saved files on every process right "
                    f"after `accelerator.save` wrote `{path}` on the main process only; put it under "
                    "`if accelerator.is_main_process:` or after `accelerator.wait_for_everyone()`",
                )
                return


def _called_on_main_only(program: Program, node: ast.AST) -> bool:
    """`node` is in a function every caller of which runs under a main-process test."""
    function = next((a for a in program.ancestors(node) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    callers = program.callers_of(function) if function is not None else []
    return bool(callers) and all(
        any(isinstance(a, ast.If) and _main_test(a.test) for a in program.ancestors(c)) for c in callers
    )


def _under_main_test(program: Program, node: ast.AST, within: ast.AST) -> bool:
    """`node` sits under an `if` of `within` that only the main process enters
    (`if is_best: if accelerator.is_main_process: shutil.copyfile(...)`)."""
    for a in program.ancestors(node):
        if isinstance(a, ast.If) and _main_test(a.test):
            return True
        if a is within:
            return False
    return False


def _main_test(test: ast.AST) -> bool:
    text = ast.unparse(test)
    return "is_main_process" in text or "is_local_main_process" in text or bool(re.search(r"rank\)? ?(==|in) ?\(?(0|-1)", text))


def _block_of(program: Program, statement: ast.AST) -> list | None:
    parent = program.parents.get(statement)
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and statement in block:
            return block
    return None


def _barrier(statement: ast.AST) -> bool:
    return any(isinstance(c, ast.Call) and last(call_name(c)) == "wait_for_everyone" for c in ast.walk(statement))


def _main_only(statement: ast.AST) -> bool:
    return isinstance(statement, ast.If) and "is_main_process" in ast.unparse(statement.test)


_MOVES_OFF = {"cpu", "half", "double", "bfloat16"}


def _prepared_model_moved(pair: Pair) -> Iterator[Problem]:
    """`model.eval().cpu()` (to save it) and back on a prepared model: DDP keeps hooks and
    buckets on the parameters it wrapped, and moving them between devices or dtypes after
    the wrap leaves the processes' gradients unsynchronised, with no error."""
    program = pair.after
    models = prepared_models(program)
    for call in program.calls:
        func = call.func
        if not isinstance(func, ast.Attribute):
            continue
        target = func.attr in _MOVES_OFF or (
            func.attr == "to" and call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value == "cpu"
        )
        owner = _chain_root(func.value)
        if target and owner in models and _wrapped_here(program, owner, call):
            yield pair.at_after(
                CODE, call,
                f"left as written: `{owner}` is moved with `.{func.attr}()` after prepare(); moving the "
                "DDP-wrapped model between devices or dtypes breaks its gradient sync: leave it where the "
                "Accelerator put it (AM106 rewrites a move made only around a save; this one is not: "
                "something else uses the moved model, or the move back is not on its own line)",
            )
            return


def _chain_root(expr: ast.AST) -> str | None:
    """`model` for `model`, `model.eval()`, `model.train().eval()`."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("eval", "train"):
        expr = expr.func.value
    return dotted(expr)


def prepared_models(program: Program) -> set[str]:
    """Names bound by prepare() to something that is not an optimizer, loader or scheduler."""
    models: set[str] = set()
    for p in program.prepares:
        for arg, target in zip(p.args, p.targets or p.args):
            if arg and target and program.kind_of(arg) == "other" and program.kind_of(target) == "other":
                models.add(target)
    return models


def _wrapped_model_uses(pair: Pair) -> Iterator[Problem]:
    program = pair.after
    models = prepared_models(program)
    if not models:
        return
    for node in program.nodes:
        if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
            continue
        owner = dotted(node.value)
        if owner not in models or node.attr in MODULE_API or _unwrapped(program, node):
            continue
        if node.attr in ("state_dict", "load_state_dict") and not _keys_matter(program, node, owner):
            continue
        if not _wrapped_here(program, owner, node):
            continue
        why = _KEYED.get(node.attr, "the prepared model is a DDP wrapper on N processes; outside the "
                         f"training step use `accelerator.unwrap_model({owner}).{node.attr}`, and inside it "
                         "run the layers through the model's own forward (a method called beside DDP's "
                         "forward gets no gradient sync)")
        yield pair.at_after(CODE, node, f"left as written: `{owner}.{node.attr}` on the prepared model: {why}")


def _wrapped_here(program: Program, owner: str, node: ast.AST, depth: int = 0) -> bool:
    """Whether `owner` at `node` is the prepared model: the binding in effect in that
    scope is the prepare() (or, in another scope, there is no local binding at all)."""
    scope = program.scope_of.get(node)
    earlier = [a for a in program.assigns if a.scope is scope and a.target == owner and a.node.lineno < node.lineno]
    if not earlier:
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not any(
            isinstance(a, (ast.For, ast.While, ast.AsyncFor)) for a in program.ancestors(node)
        ):
            return False  # module code runs top down: nothing above bound it (`model = model.Net()`)
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(a.scope is scope and a.target == owner for a in program.assigns):
                return False  # a local of its own, bound later
            if owner in {a.arg for a in scope.args.args + scope.args.kwonlyargs}:
                return depth < 3 and _fed_prepared(program, scope, owner, depth)
            if owner.startswith("self.") and depth < 3 and _called_before_prepare(program, scope, owner, depth):
                return False
        return True
    latest = max(earlier, key=lambda a: a.node.lineno)
    value = getattr(latest.node, "value", None)
    return isinstance(value, ast.Call) and last(call_name(value)) == "prepare"


def _called_before_prepare(program: Program, method: ast.AST, owner: str, depth: int) -> bool:
    """A method (`_load_snapshot`) whose every call is `self.<method>(...)` in a method of
    the same class where `owner` is not yet the prepared model (`__init__` restores a
    snapshot, then prepares): there `self.model` is still the user's own module."""
    cls = program.enclosing_class(method)
    callers = program.callers_of(method)
    if cls is None or not callers:
        return False
    for call in callers:
        if dotted(call.func.value) != "self" or program.enclosing_class(program.scope_of.get(call)) is not cls:
            return False
        if _wrapped_here(program, owner, call, depth + 1):
            return False
    return True


def _fed_prepared(program: Program, function: ast.AST, param: str, depth: int) -> bool:
    """Some caller of `function` passes a prepared model as `param` (none found: assume so,
    unless the file carries the callers' stub of a run of several files, which shows every
    caller the run gives a prepared object: the others hand it plain, or unwrapped by AM207)."""
    callers = program.callers_of(function)
    if not callers and CALLERS_STUB in program.functions:
        return False
    params = [a.arg for a in function.args.args]
    index = params.index(param) - (1 if params[:1] == ["self"] else 0) if param in params else -1
    models = prepared_models(program)
    given_any = False
    for call in callers:
        given = next((k.value for k in call.keywords if k.arg == param), None)
        if given is None and 0 <= index < len(call.args):
            given = call.args[index]
        if given is not None:
            given_any = True
            if dotted(given) in models and _wrapped_here(program, dotted(given), given, depth + 1):
                return True
    return not given_any


_SAVES = ("save", "save_file", "save_pretrained", "dump")
_LOADS = ("load", "load_file", "load_state_dict_from_url")


def _keys_matter(program: Program, node: ast.Attribute, owner: str) -> bool:
    """A prepared model's state_dict keys carry `module.` on N processes. That matters
    when they meet another module or a file: saved, loaded into something else, indexed
    key by key, or a file's keys loaded into the wrapper. An in-memory copy loaded back
    into the same model is fine."""
    call = program.parents.get(node)
    if node.attr == "load_state_dict":
        return isinstance(call, ast.Call) and any(_from_file(program, a) for a in call.args)
    for parent in program.ancestors(node):
        if isinstance(parent, ast.Call):
            callee = call_name(parent)
            if last(callee) in _SAVES or (last(callee) == "load_state_dict" and not callee.startswith(owner + ".")):
                return True
        if isinstance(parent, ast.stmt):
            break
    statement = program.statement_of(node)
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        name = dotted(statement.targets[0])
        return name is not None and any(
            isinstance(n, ast.Subscript) and dotted(n.value) == name and isinstance(n.ctx, ast.Load)
            for n in program.nodes
        )
    return False


def _from_file(program: Program, expr: ast.AST, depth: int = 0) -> bool:
    for n in ast.walk(expr):
        if isinstance(n, ast.Call) and last(call_name(n)) in _LOADS:
            return True
        if isinstance(n, ast.Name) and depth < 2:
            if any(_from_file(program, v, depth + 1) for v in program.values_of(n.id)):
                return True
    return False


def _unwrapped(program: Program, node: ast.Attribute) -> bool:
    """`accelerator.unwrap_model(model).x` reads through the wrapper explicitly."""
    parent = program.parents.get(node.value)
    return isinstance(parent, ast.Call) and last(call_name(parent)) == "unwrap_model"


def _orphan_set_epoch(pair: Pair) -> Iterator[Problem]:
    if "DistributedSampler" not in pair.before_text or "DistributedSampler" in pair.after_text:
        return
    for call in pair.after.calls:
        name = call_name(call)
        if name.endswith(".set_epoch") and "sampler" in name and not _guarded_by_hasattr(pair.after, call):
            yield pair.at_after(
                CODE, call,
                f"left as written: `{name}(...)` would remain after its DistributedSampler is "
                "removed (a plain sampler has no set_epoch); the prepared loader reshuffles each epoch",
            )


def _guarded_by_hasattr(program: Program, call: ast.Call) -> bool:
    """`if hasattr(loader.sampler, "set_epoch"): loader.sampler.set_epoch(epoch)`."""
    return any(
        isinstance(a, ast.If) and "hasattr" in ast.unparse(a.test) and "set_epoch" in ast.unparse(a.test)
        for a in program.ancestors(call)
    )


def _device_strings(pair: Pair) -> Iterator[Problem]:
    """`device == "cuda"` or `autocast(device_type=device)` where `device` changed from a
    string to the Accelerator's torch.device."""
    program = pair.after
    devices = {
        a.target for a in program.assigns
        if isinstance(a.value, ast.Attribute) and a.value.attr == "device" and program.is_accelerator(a.value.value)
        and not pair.before.is_torch_device(a.target)
    }
    if not devices:
        return
    for node in program.nodes:
        used = None
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides):
                used = next((dotted(s) for s in sides if dotted(s) in devices), None)
        elif isinstance(node, ast.keyword) and node.arg == "device_type" and dotted(node.value) in devices:
            used, node = dotted(node.value), node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("startswith", "split"):
            used = dotted(node.func.value) if dotted(node.func.value) in devices else None
        if used:
            yield pair.at_after(
                CODE, node,
                f"left as written: `{used}` would become the Accelerator's torch.device, but it is "
                f"used as a string here; compare `{used}.type` instead",
            )

