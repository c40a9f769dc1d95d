"""`torch.save` in a training script: what it saves, what to unwrap, and where every
process can wait for the others before the main process writes.

Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from migrator.analysis.branches import accelerator_method
from migrator.analysis.loop import is_main_guard
from migrator.analysis.names import dotted_name
from migrator.analysis.roles import Role
from migrator.analysis.uniform import reached_alike, same_everywhere
from migrator.analysis.walk import walk

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis

_SAVES = {"torch.save"}
# Everything that writes a state dict: what AM501 and AM205 tell apart (saved vs. used).
_WRITERS = {"torch.save", "safetensors.torch.save_file", "safetensors.torch.save_model"}
# Paths that differ on every process: each rank makes its own temporary directory or file.
_TEMPORARY = {
    "tempfile.TemporaryDirectory", "tempfile.mkdtemp", "tempfile.NamedTemporaryFile",
    "tempfile.mkstemp", "tempfile.TemporaryFile", "tempfile.SpooledTemporaryFile",
    # a buffer in the process's memory (deit's EMA copy: `torch.save(state, buf)`, then
    # `torch.load(buf)`): saved on the main process only, the others would read it empty
    "io.BytesIO", "io.StringIO",
}
_BLOCK_OWNERS = (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Try, cst.Module)


@dataclass(frozen=True, eq=False)
class Save:
    """`torch.save(obj, f)`: `models` are the expressions of models saved whole or through
    `.state_dict()`, which must be unwrapped (also at the call sites of a helper that
    saves its parameter: `save_checkpoint({"state_dict": model.state_dict()}, ...)`);
    `anchor` is the statement before which `wait_for_everyone()` goes (None: nowhere
    safe, e.g. only the main process runs this code, or a helper called from several
    places); `opened` is the `with open(path, "wb") as f:` whose file the save writes
    (every process would open, and truncate, it)."""

    call: cst.Call
    models: tuple[cst.BaseExpression, ...]
    anchor: cst.BaseStatement | None
    opened: cst.With | None = None


def saves(analysis: "ScriptAnalysis") -> tuple[Save, ...]:
    out = []
    for c in analysis.facts.calls:
        if c.qualified not in _SAVES or not c.node.args:
            continue
        if len(c.node.args) > 1 and per_process_path(analysis, c.node.args[1].value):
            continue  # a file per process (`f"preds_{rank}.pt"`, a TemporaryDirectory): every process writes its own
        obj = c.node.args[0].value
        models = list(_models_in(analysis, obj))
        anchor = barrier_anchor(analysis, c.node)
        sites = _helper_call_sites(analysis, c.scope, obj)
        if sites is not None:
            anchor = barrier_anchor(analysis, sites[0][0]) if len(sites) == 1 else None
            for _, arg in sites:
                models += _models_in(analysis, arg)
        opened = opened_file(analysis, c.node.args[1].value) if len(c.node.args) > 1 else None
        out.append(Save(c.node, tuple(models), anchor, opened))
    return tuple(out)


_PER_PROCESS = ("rank", "process_index", "local_process_index")


def per_process_path(analysis: "ScriptAnalysis", path: cst.BaseExpression) -> bool:
    """A path that names a different file on every process: built from the rank, or
    inside a temporary directory each process makes for itself (`with TemporaryDirectory()
    as d: p = os.path.join(d, "best.pt")`), or a buffer in its memory (`io.BytesIO()`).
    Saving there once, on the main process, would leave the others nothing to load back."""
    return _from_rank(analysis, path, depth=0) or _from_temporary(analysis, path, depth=0)


def _from_rank(analysis: "ScriptAnalysis", expr: cst.BaseExpression, depth: int) -> bool:
    """`expr` names the rank, or is a name its scope binds only to values that do, through
    up to 3 bindings (BLIP's `result_file = os.path.join(dir, '%s_rank%d.json' % (name,
    utils.get_rank()))`)."""
    if any(word in cst.Module([]).code_for_node(expr) for word in _PER_PROCESS):
        return not _only_indices(analysis, expr)
    if depth >= 3 or not isinstance(expr, cst.Name):
        return False
    scope = analysis.scope_of(expr)
    values = [b.element or b.value for b in analysis.facts.bindings if b.name == expr.value and b.scope is scope]
    return bool(values) and all(v is not None and _from_rank(analysis, v, depth + 1) for v in values)


def _only_indices(analysis: "ScriptAnalysis", expr: cst.BaseExpression) -> bool:
    """Every per-process word in `expr` is a parameter named like a rank that each caller
    in this file fills with a loop's count (pytorch-a2c's `make_env(env_name, seed, i, ...)
    for i in range(num_processes)`, whose `rank` is an environment's index within one
    process): the path is the same on every process."""
    bearers: list[cst.Name] = []
    other = False

    class _Words(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            nonlocal other
            other = other or _has_word(cst.Module([]).code_for_node(node))
            return False  # `args.rank`, `dist.get_rank()`: the process's own

        def visit_Name(self, node: cst.Name) -> None:
            if _has_word(node.value):
                bearers.append(node)

        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            nonlocal other
            other = other or _has_word(node.value)

        def visit_FormattedStringText(self, node: cst.FormattedStringText) -> None:
            nonlocal other
            other = other or _has_word(node.value)

    walk(expr, _Words())
    return bool(bearers) and not other and all(_index_parameter(analysis, name) for name in bearers)


def _has_word(text: str) -> bool:
    return any(word in text for word in _PER_PROCESS)


def _index_parameter(analysis: "ScriptAnalysis", name: cst.Name) -> bool:
    """`name` is a parameter of its function (or of one it is nested in) that every call
    in this file gives a loop's target: the function runs once per item, in this process."""
    scope = analysis.scope_of(name)
    while isinstance(scope, cst.FunctionDef) and name.value not in analysis.facts.params.get(id(scope), ()):
        if analysis.binds(scope, name.value):
            return False
        scope = analysis.scope_of(scope)
    if not isinstance(scope, cst.FunctionDef):
        return False
    callers = analysis.branches.callers(scope)
    positional = [p.name.value for p in (*scope.params.posonly_params, *scope.params.params)]
    index = positional.index(name.value) if name.value in positional else -1  # -1: keyword-only, or `*args`
    return bool(callers) and all(_loop_target(analysis, _given(call, index, name.value), call) for call in callers)


def _given(call: cst.Call, index: int, keyword: str) -> cst.BaseExpression | None:
    given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
    if given is None and 0 <= index < len(call.args) and call.args[index].keyword is None and not call.args[index].star:
        given = call.args[index].value
    return given


def _loop_target(analysis: "ScriptAnalysis", given: cst.BaseExpression | None, call: cst.Call) -> bool:
    """`given` is a plain name a `for` or comprehension around `call` binds, not named
    like a rank."""
    if not isinstance(given, cst.Name) or _has_word(given.value):
        return False
    current = analysis.parent(call)
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        if any(isinstance(n, cst.Name) and n.value == given.value for n in _loop_targets(current)):
            return True
        current = analysis.parent(current)
    return False


def _loop_targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """The names a `for` statement or a comprehension binds for each item."""
    if isinstance(node, cst.For):
        return _targets(node.target)
    out: list[cst.BaseExpression] = []
    comprehensions = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
    comp = node.for_in if isinstance(node, comprehensions) else None
    while comp is not None:
        out += _targets(comp.target)
        comp = comp.inner_for_in
    return out


def _targets(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _targets(e.value)]
    return [target]


def _from_temporary(analysis: "ScriptAnalysis", expr: cst.CSTNode, depth: int) -> bool:
    """Whether `expr` reads a temporary directory or file, through up to 3 bindings."""
    if depth > 3:
        return False
    imports = analysis.imports
    names: set[str] = set()

    class _Reads(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if (imports.qualify(node.func) or "") in _TEMPORARY:
                names.add("")  # a temporary made right here

        def visit_Name(self, node: cst.Name) -> None:
            names.add(node.value)

    walk(expr, _Reads())
    if "" in names:
        return True
    for item in analysis.nodes("WithItem"):
        target = item.asname.name if item.asname is not None else None  # type: ignore[attr-defined]
        if isinstance(target, cst.Name) and target.value in names and _from_temporary(analysis, item.item, depth + 1):  # type: ignore[attr-defined]
            return True
    for b in analysis.facts.bindings:
        if b.name in names and b.value is not None and b.value is not expr:
            if _from_temporary(analysis, b.element or b.value, depth + 1):
                return True
    return False


def opened_file(analysis: "ScriptAnalysis", path: cst.BaseExpression) -> cst.With | None:
    """The enclosing `with open(...) as f:` when `path` is that `f`."""
    if not isinstance(path, cst.Name):
        return None
    current = analysis.parent(path)
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        if isinstance(current, cst.With):
            for item in current.items:
                target = item.asname.name if item.asname is not None else None
                call = item.item
                if isinstance(target, cst.Name) and target.value == path.value and isinstance(call, cst.Call):
                    if (analysis.imports.qualify(call.func) or dotted_name(call.func) or "") in ("open", "builtins.open", "io.open"):
                        return current
        current = analysis.parent(current)
    return None


def is_save_call(analysis: "ScriptAnalysis", call: cst.Call) -> bool:
    """`torch.save`, `accelerator.save` or a safetensors writer."""
    if accelerator_method(call, analysis.accelerator_names) == "save":
        return True
    return (analysis.imports.qualify(call.func) or "") in _WRITERS


def state_dict_saved(analysis: "ScriptAnalysis", call: cst.Call) -> bool:
    """Whether the result of `call` (a `model.state_dict()`) is written to a file: inside a
    save call's arguments, or assigned to a name a later save call of the function takes."""
    saves = [c.node for c in analysis.facts.calls if is_save_call(analysis, c.node)]
    current = analysis.parent(call)
    while current is not None and not isinstance(current, cst.BaseStatement):
        if any(current is s for s in saves):
            return True
        current = analysis.parent(current)
    small = analysis.statement_of(call)
    if not isinstance(small, cst.Assign) or len(small.targets) != 1:
        return False
    name = dotted_name(small.targets[0].target)
    scope = analysis.scope_of(call)
    order = analysis.order(call)
    return any(
        analysis.scope_of(s) is scope and analysis.order(s) > order
        and any(dotted_name(a.value) == name for a in s.args)
        for s in saves
    )


def paired_loads(analysis: "ScriptAnalysis", save: cst.Call) -> tuple[cst.Call, ...]:
    """`torch.load(path)` calls that read back what `save` writes: the same path (or the
    same file opened by `with open(path) as f:`), later in the file, in the same function
    (or any function, for a literal path). Once the save runs on the main process only,
    every other process must wait for it before these."""
    if len(save.args) < 2:
        return ()
    path = _file_path(analysis, save.args[1].value)
    text = cst.Module([]).code_for_node(path).strip()
    literal = isinstance(path, (cst.SimpleString, cst.ConcatenatedString))
    scope = analysis.scope_of(save)
    out = []
    for c in analysis.facts.calls:
        if c.qualified != "torch.load" or not c.node.args:
            continue
        given = cst.Module([]).code_for_node(_file_path(analysis, c.node.args[0].value)).strip()
        if given != text or analysis.order(c.node) < analysis.order(save):
            continue
        if literal or analysis.scope_of(c.node) is scope:
            out.append(c.node)
    return tuple(out)


def _file_path(analysis: "ScriptAnalysis", expr: cst.BaseExpression) -> cst.BaseExpression:
    """`path` for the `f` of `with open(path, ...) as f:`; `expr` itself otherwise."""
    opened = opened_file(analysis, expr)
    if opened is not None:
        for item in opened.items:
            if item.asname is not None and isinstance(item.asname.name, cst.Name) and isinstance(expr, cst.Name):
                if item.asname.name.value == expr.value and isinstance(item.item, cst.Call) and item.item.args:
                    return item.item.args[0].value
    return expr


def _helper_call_sites(analysis: "ScriptAnalysis", scope, obj: cst.BaseExpression):
    """For `def save_checkpoint(state, ...): torch.save(state, ...)`, every call of the
    helper in this file with the argument that becomes `state`; None when the saved object
    is not a parameter of a plain function."""
    facts = analysis.facts
    if not (isinstance(scope, cst.FunctionDef) and isinstance(obj, cst.Name)) or id(scope) in facts.method_of:
        return None
    params = scope.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    if obj.value not in positional and obj.value not in [p.name.value for p in params.kwonly_params]:
        return None
    index = positional.index(obj.value) if obj.value in positional else None
    sites = []
    for c in facts.calls:
        if not (isinstance(c.node.func, cst.Name) and c.node.func.value == scope.name.value):
            continue
        arg = next((a.value for a in c.node.args if a.keyword is not None and a.keyword.value == obj.value), None)
        if arg is None and index is not None and index < len(c.node.args) and c.node.args[index].keyword is None:
            arg = c.node.args[index].value
        if arg is not None:
            sites.append((c.node, arg))
    return sites or None


def _models_in(analysis: "ScriptAnalysis", obj: cst.BaseExpression) -> tuple[cst.BaseExpression, ...]:
    """`model` in `model.state_dict()`, or `model` saved whole (not `.module`: AM211 and
    AM204 rewrite that)."""
    found: list[cst.BaseExpression] = []
    roles = analysis.roles

    def is_model(expr: cst.BaseExpression) -> bool:
        return isinstance(expr, (cst.Name, cst.Attribute)) and roles.of(dotted_name(expr)) is Role.MODEL

    if is_model(obj):
        return (obj,)

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "state_dict" and is_model(func.value):
                found.append(func.value)

        def visit_DictElement(self, node: cst.DictElement) -> None:
            if is_model(node.value):  # `{"model": model, ...}`: pickled whole, with the checkpoint
                found.append(node.value)

        def visit_Element(self, node: cst.Element) -> None:
            if is_model(node.value):  # `[actor_critic, obs_rms]` (pytorch-a2c): pickled whole too
                found.append(node.value)

    walk(obj, _Find())
    for bound in _dicts_bound(analysis, obj):  # its `model.state_dict()` values are AM501's
        found += [e.value for e in bound.elements if isinstance(e, cst.DictElement) and is_model(e.value)]
    return tuple(found)


def _dicts_bound(analysis: "ScriptAnalysis", obj: cst.BaseExpression) -> list[cst.Dict]:
    """`state = {'epoch': epoch, 'model': model, 'optimizer': optimizer}`, then
    `torch.save(state, filename)` (the SSD tutorial's save_checkpoint): the dict literal
    the saved name is bound to in the same function, when every binding there is one."""
    if not isinstance(obj, cst.Name):
        return []
    scope = analysis.scope_of(obj)
    values = [b.value for b in analysis.facts.bindings if b.name == obj.value and b.scope is scope]
    return values if values and all(isinstance(v, cst.Dict) for v in values) else []  # type: ignore[return-value]


def optimizers_in(analysis: "ScriptAnalysis", obj: cst.BaseExpression) -> tuple[cst.BaseExpression, ...]:
    """Prepared optimizers pickled whole in a saved dict (`{"optimizer": optimizer}`): the
    Accelerator's wrapper, not the user's optimizer, would be in the checkpoint."""
    roles, prepared = analysis.roles, analysis.prepared
    found: list[cst.BaseExpression] = []

    class _Find(cst.CSTVisitor):
        def visit_DictElement(self, node: cst.DictElement) -> None:
            name = dotted_name(node.value) if isinstance(node.value, (cst.Name, cst.Attribute)) else None
            if name and name in prepared and roles.of(name) is Role.OPTIMIZER:
                found.append(node.value)

    for saved in (obj, *_dicts_bound(analysis, obj)):
        walk(saved, _Find())
    return tuple(found)


def barrier_anchor(analysis: "ScriptAnalysis", node: cst.CSTNode, depth: int = 0) -> cst.BaseStatement | None:
    """The statement every process reaches before `node` runs: `node`'s statement line,
    lifted out of every enclosing `if` up to the innermost loop or function body (a test
    that differs between processes must not hold a barrier), but not out of an `if` in a
    loop whose test every process evaluates alike (`if step % args.save_every == 0:`):
    there the barrier waits only at the steps that save. In a function that some
    call of this file runs under an `if` (`if gpu_id == 0: self._save(epoch)`, a test the
    analysis may not know to be a rank test), the barrier goes before that call instead,
    lifted the same way; with several such callers, nowhere. None when only the main
    process runs the code (a barrier there would wait forever)."""
    branches = analysis.branches
    branch = branches.branch_of(node)
    if branch is not None and branch.kind in ("guard", "decorator"):
        return None
    if branch is None and branches.runs_only_on_main(node):
        return None
    current = analysis.line_of(node)
    anchor = current
    alike = True  # the tests of this `if` and of every `elif` passed on the way up are shared
    while current is not None:
        up = analysis.parent(current)
        if up is None or isinstance(up, _BLOCK_OWNERS) or is_main_guard(up):
            break
        if isinstance(up, cst.If):
            alike = alike and _in_loop(analysis, up) and same_everywhere(analysis, up.test)
        if isinstance(up, (cst.If, cst.With)) and isinstance(analysis.parent(up), (cst.IndentedBlock, cst.Module)):
            # out of a `with open(path) as f:` too: the open already reads or truncates; an
            # `if` every process enters alike (`if step % 1000 == 0:`) may keep the barrier,
            # unless an `if` further out does not
            if not (isinstance(up, cst.If) and alike):
                anchor = up
            alike = True
        current = up
    if isinstance(anchor, cst.SimpleStatementSuite):
        return None  # a one-line body (`def save(self): torch.save(...)`) has no line to put a barrier on
    if _in_loop(analysis, anchor) and not reached_alike(analysis, anchor):
        return None  # a process that left the iteration early (`continue` on its own loss) would never arrive
    function = branches.function_of(node)
    if function is not None and depth < 3:
        calls = branches.callers(function)
        if any(_under_if(analysis, call) for call in calls):
            return barrier_anchor(analysis, calls[0], depth + 1) if len(calls) == 1 else None
    return anchor  # type: ignore[return-value]


def _in_loop(analysis: "ScriptAnalysis", node: cst.CSTNode) -> bool:
    """Whether `node` runs in a loop of its own function: outside one, a barrier lifted out
    of the `if` runs once and costs nothing."""
    current = analysis.parent(node)
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        if isinstance(current, (cst.For, cst.While)):
            return True
        current = analysis.parent(current)
    return False


def _under_if(analysis: "ScriptAnalysis", node: cst.CSTNode) -> bool:
    """Whether an `if` of `node`'s own function (or module) decides whether it runs
    (`if __name__ == "__main__":` does not: every process runs the script as main)."""
    current = analysis.parent(node)
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        if isinstance(current, cst.If) and not is_main_guard(current):
            return True
        current = analysis.parent(current)
    return False
