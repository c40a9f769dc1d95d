"""Device variables (`device = torch.device(...)`) and device moves (`.to(device)`,
`.cuda()`), and which moves are safe to drop once prepare() places things."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrator.analysis.collect import Binding, Facts
from migrator.analysis.names import ImportTable, dotted_name
from migrator.analysis.walk import walk

_CONFIG_HEADS = {"args", "self", "cfg", "config", "opt", "opts", "hparams", "params", "flags", "FLAGS"}
_DEVICE_STRINGS = ("cuda", "mps", "xpu")


@dataclass(frozen=True, eq=False)
class DeviceMove:
    """A `.to(...)`/`.cuda(...)` call that moves `receiver` to a device.

    `kept_args` are the arguments that must survive (a dtype); empty means the whole call
    reduces to its receiver. `device_arg` is the expression naming the device, if any.
    """

    call: cst.Call
    receiver: cst.BaseExpression
    device_arg: cst.BaseExpression | None
    kept_args: tuple[cst.Arg, ...]


@dataclass(frozen=True, eq=False)
class DeviceVariable:
    name: str
    binding: Binding


def is_device_value(expr: cst.BaseExpression | None, imports: ImportTable) -> bool:
    """Values people assign to a device variable: torch.device(...), "cuda", a ternary of
    those, `args.device`."""
    if expr is None:
        return False
    if isinstance(expr, cst.Call):
        return imports.qualify(expr.func) in {"torch.device", "torch.accelerator.current_accelerator"}
    if isinstance(expr, cst.IfExp):
        return is_device_value(expr.body, imports) or is_device_value(expr.orelse, imports)
    if isinstance(expr, cst.SimpleString):
        value = str(expr.evaluated_value)
        return value.startswith(_DEVICE_STRINGS) or value == "cpu"
    dotted = dotted_name(expr) or ""
    return _config_device(dotted)


def _config_device(dotted: str) -> bool:
    """`args.device`, `cfg.device`, `config.DEVICE` (a settings module's constant)."""
    return dotted.lower().endswith(".device") and dotted.split(".")[0] in _CONFIG_HEADS


def _local_rank_names(facts: Facts) -> set[str]:
    from migrator.analysis.distributed import local_rank_names  # distributed reads device facts

    return local_rank_names(facts)


def rank_device_string(expr: cst.BaseExpression | None, ranks: set[str]) -> bool:
    """`f"cuda:{local_rank}"` / `"cuda:%d" % local_rank`: this process's GPU spelled from
    the launcher's local rank (`args.local_rank` too), which is the Accelerator's device
    under a launcher and the CPU's place where there is no GPU."""
    if isinstance(expr, cst.FormattedString):
        parts = expr.parts
        return (
            len(parts) == 2
            and isinstance(parts[0], cst.FormattedStringText)
            and parts[0].value == "cuda:"
            and isinstance(parts[1], cst.FormattedStringExpression)
            and parts[1].format_spec is None
            and parts[1].conversion is None
            and _local_rank(parts[1].expression, ranks)
        )
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo):
        return (
            isinstance(expr.left, cst.SimpleString)
            and expr.left.evaluated_value in ("cuda:%d", "cuda:%s", "cuda:%i")
            and _local_rank(expr.right, ranks)
        )
    return False


def _local_rank(expr: cst.BaseExpression, ranks: set[str]) -> bool:
    """A local-rank name, `args.local_rank`, `int(os.environ["LOCAL_RANK"])` or the
    Accelerator's `local_process_index`."""
    from migrator.analysis.distributed import _env_name

    if isinstance(expr, cst.Call) and dotted_name(expr.func) == "int" and len(expr.args) == 1:
        return _env_name(expr.args[0].value) == "LOCAL_RANK"
    name = dotted_name(expr) or ""
    return name in ranks or name.rsplit(".", 1)[-1] in ("local_rank", "local_process_index")


def device_variables(facts: Facts) -> list[DeviceVariable]:
    """Bindings that pick a device. One computed from another device variable
    (`device_type = "cuda" if "cuda" in device else "cpu"`) follows it and is not one."""
    ranks = _local_rank_names(facts)
    found = [
        b for b in facts.bindings
        if b.element is None and (is_device_value(b.value, facts.imports) or rank_device_string(b.value, ranks))
    ]
    names = {b.name for b in found} | {
        b.name for b in facts.bindings if (dotted_name(b.value) or "").endswith(".device")  # accelerator.device
    }
    return [DeviceVariable(b.name, b) for b in found if not (_reads(b.value, names - {b.name}))]


def _reads(expr: cst.CSTNode | None, names: set[str]) -> bool:
    if expr is None or not names:
        return False
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found
            found = found or node.value in names

    walk(expr, _Find())
    return found


def is_device_expr(expr: cst.BaseExpression, device_names: set[str], imports: ImportTable) -> bool:
    """An argument that names a device: a device variable, torch.device(...), "cuda:0",
    `args.device`, a device index. `"cpu"` is not: moving to the CPU stays explicit."""
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, cst.SimpleString):
        return str(expr.evaluated_value).startswith(_DEVICE_STRINGS)
    if isinstance(expr, cst.Call):
        return imports.qualify(expr.func) == "torch.device"
    dotted = dotted_name(expr)
    if dotted is None:
        return False
    if dotted in device_names:
        return True
    return _config_device(dotted)


def device_move(call: cst.Call, device_names: set[str], imports: ImportTable) -> DeviceMove | None:
    """Recognise `x.cuda(...)`, `x.to(device, ...)`, `x.to(device=device, ...)`."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in {"to", "cuda"}:
        return None
    if func.attr.value == "cuda":
        return DeviceMove(call, func.value, call.args[0].value if call.args else None, ())
    device_arg = None
    kept: list[cst.Arg] = []
    for i, arg in enumerate(call.args):
        keyword = arg.keyword.value if arg.keyword else None
        if device_arg is None and (
            (keyword is None and i == 0) or keyword == "device"
        ) and is_device_expr(arg.value, device_names, imports):
            device_arg = arg.value
            continue
        if keyword in {"non_blocking", "copy"}:
            continue
        kept.append(arg)
    if device_arg is None:
        return None
    return DeviceMove(call, func.value, device_arg, tuple(kept))  # the call's own Arg nodes


# Which moves prepare() makes redundant ------------------------------------------------
#
# The Accelerator places one object per prepared name: the one bound before the prepare
# call in its scope (or returned by it). A model rebuilt later (`model = Net().to(device)`
# for inference after training), one built in another function, a prepared model moved
# back after `.cpu()`, and batches of a loader that is never prepared all keep their
# moves: nothing else would put them on the device.


def prepared_bindings(facts: Facts, prepare_calls, plan, parent) -> frozenset[int]:
    """ids of the bindings whose object the Accelerator places: in the prepare's scope, at
    or before it (an existing `... = accelerator.prepare(...)` or the planned one)."""
    out: set[int] = set()
    call_scopes = {id(c.node): c.scope for c in facts.calls}
    for prep in prepare_calls:
        scope = call_scopes.get(id(prep.call))
        names = {n for n in (*prep.args, *prep.targets) if n}
        limit = facts.order.get(prep.statement, -1)
        for b in facts.bindings:
            if b.name in names and b.scope is scope and facts.order.get(b.statement, limit + 1) <= limit:
                out.add(id(b))
    if plan is not None:
        block = plan.block
        for group in plan.groups:
            anchor = next((i for i, s in enumerate(block.body) if s is group.after), None)
            if anchor is None:  # a loader bound in one branch, prepared at that branch's end
                limit = facts.order.get(group.after, -1)
                out |= {
                    id(b) for b in facts.bindings
                    if b.name in group.names and b.scope is block.scope and facts.order.get(b.statement, limit + 1) <= limit
                }
                continue
            for b in facts.bindings:
                if b.name in group.names and b.scope is block.scope:
                    index = block.index_of(b.statement, parent)
                    if index is not None and index <= anchor:
                        out.add(id(b))
    return frozenset(out)


def droppable_moves(facts: Facts, roles, moves, prepared: set[str], placed: frozenset[int], parent) -> set[int]:
    """ids of move calls that prepare() makes redundant: moves of the prepared model (or
    of its construction) and of batches drawn from a prepared dataloader. `placed` comes
    from prepared_bindings()."""
    from migrator.analysis.loop import batch_names
    from migrator.analysis.roles import Role

    loop_batches: dict[int, set[str]] = {}
    for loop in facts.loops:
        if roles.of(loop.iter_name) is Role.DATALOADER and _prepared_loader(facts, loop, prepared, placed):
            loop_batches[id(loop.node)] = batch_names(loop, facts)
    prepared_values = {id(b.value) for b in facts.bindings if id(b) in placed and b.value is not None}
    calls = {id(c.node): c for c in facts.calls}
    out: set[int] = set()
    for move in moves:
        fact = calls.get(id(move.call))
        receiver = dotted_name(move.receiver)
        order = _line_order(facts, move.call, parent)
        if receiver in prepared and roles.of(receiver) is Role.MODEL:
            if fact is not None and _places_receiver(facts, receiver, fact, placed, order):
                if not _copied_later(facts, roles, receiver, fact.scope, order, prepared) \
                        and not _parameters_kept_later(facts, receiver, fact.scope, order):
                    out.add(id(move.call))
            continue
        if _is_prepared_construction(move.call, prepared_values, parent, facts.imports):
            bound = next((b.name for b in facts.bindings if b.statement is not None and facts.order.get(b.statement) == order), None)
            if fact is None or bound is None or not (
                _copied_later(facts, roles, bound, fact.scope, order, prepared)
                or _parameters_kept_later(facts, bound, fact.scope, order)
            ):
                out.add(id(move.call))
            continue
        batch = set().union(*(loop_batches.get(id(l), set()) for l in fact.loops)) if fact else set()
        if batch and _from_batch(move, batch, parent):
            out.add(id(move.call))
    return out


def _copied_later(facts: Facts, roles, name: str, scope, order: int, prepared: set[str]) -> bool:
    """After the move, a model nothing prepares is built from this one (`ema =
    AveragedModel(model)`, `teacher = copy.deepcopy(model)`): it copies the parameters
    where they are, so the move stays (on the Accelerator's device) to put the copy there."""
    from migrator.analysis.distributed import WRAPPERS
    from migrator.analysis.roles import EMA_CLASS, Role, peel_moves

    for b in facts.bindings:
        value = b.value
        if b.scope is not scope or b.name == name or b.name in prepared or not isinstance(value, cst.Call) or not value.args:
            continue
        if facts.imports.qualify(value.func) in WRAPPERS:
            continue  # a hand-made DDP wrap: it goes, and prepare() places the model
        callee = facts.imports.qualify(value.func) or dotted_name(value.func) or ""
        # a copy of a model is one, whatever it is named; so is an EMA of it (`ema = EMA(model)`,
        # a class of the file that deep-copies it in `__init__`)
        copied = callee == "copy.deepcopy" or bool(EMA_CLASS.search(callee.rsplit(".", 1)[-1])) or _copies_its_model(facts, callee)
        if facts.order.get(b.statement, -1) <= order or not (copied or roles.of(b.name) is Role.MODEL):
            continue
        first = value.args[0]
        if first.keyword is None and dotted_name(peel_moves(first.value)) == name:
            return True
    return False


def _parameters_kept_later(facts: Facts, name: str, scope, order: int) -> bool:
    """After the move, a loop over the model's parameters keeps their tensors (BiDAF's
    `for name, param in model.named_parameters(): ema.register(name, param.data)`): they
    are copied where they are, so the move stays (reader R6, 29th session: without it the
    shadows stayed on the CPU and `ema.update` failed at the first step)."""
    for loop in facts.loops:
        source = loop.node.iter
        if loop.scope is not scope or facts.order.get(loop.node, -1) <= order or not isinstance(source, cst.Call):
            continue
        func = source.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("items", "values"):
            inner = func.value
            func = inner.func if isinstance(inner, cst.Call) else func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("named_parameters", "parameters", "state_dict")
                and dotted_name(func.value) == name):
            continue
        kept = False

        class _Find(cst.CSTVisitor):
            def visit_Attribute(self, node: cst.Attribute) -> None:
                nonlocal kept
                kept = kept or node.attr.value in ("data", "clone", "detach")

        walk(loop.node.body, _Find())
        if kept:
            return True
    return False


def _copies_its_model(facts: Facts, callee: str) -> bool:
    """A class of this file whose `__init__` deep-copies its first parameter
    (`self.shadow = copy.deepcopy(model)`: an average kept under any name)."""
    cls = facts.classes.get(callee)
    init = next(
        (f for f in facts.functions.get("__init__", ()) if facts.method_of.get(id(f)) is cls), None,
    ) if cls is not None else None
    params = [p.name.value for p in init.params.params] if init is not None else []
    if len(params) < 2:
        return False
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            copies = facts.imports.qualify(node.func) == "copy.deepcopy"
            found = found or copies and bool(node.args) and dotted_name(node.args[0].value) == params[1]

    walk(init.body, _Find())  # type: ignore[union-attr]
    return found


def _reaching(facts: Facts, name: str, scope, order: int) -> Binding | None:
    """The last binding of `name` in `scope` above `order` (document order)."""
    found = None
    for b in facts.bindings:
        if b.name == name and b.scope is scope and facts.order.get(b.statement, order) < order:
            if found is None or facts.order[b.statement] > facts.order[found.statement]:
                found = b
    return found


def _line_order(facts: Facts, node: cst.CSTNode, parent) -> int:
    """Document order of the statement around `node` (a binding on that very line, as in
    `model = model.to(device)`, is not what the move receives)."""
    current = node
    while current is not None and not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        current = parent(current)
    return facts.order.get(current if current is not None else node, 0)


def _places_receiver(facts: Facts, name: str, fact, placed: frozenset[int], order: int) -> bool:
    """`model.to(device)` is redundant when `model` here is the prepared object (bound
    before the prepare, or a parameter or global) and nothing in this scope moves it to
    the CPU (`model.eval().cpu()` ... `model.to(device).train()` must move it back)."""
    binding = _reaching(facts, name, fact.scope, order)
    if binding is not None and id(binding) not in placed:
        return False
    return not _moved_to_cpu(facts, name, fact.scope)


def _moved_to_cpu(facts: Facts, name: str, scope) -> bool:
    for c in facts.calls:
        if c.scope is not scope or not isinstance(c.node.func, cst.Attribute):
            continue
        method = c.node.func.attr.value
        to_cpu = method == "cpu" or (
            method == "to" and c.node.args and isinstance(c.node.args[0].value, cst.SimpleString)
            and c.node.args[0].value.evaluated_value == "cpu"
        )
        if to_cpu and _chain_root(c.node.func.value) == name:
            return True
    return False


_MODULE_METHODS = {"eval", "train", "float", "half", "double", "bfloat16", "requires_grad_", "to", "cuda", "cpu"}


def _chain_root(expr: cst.BaseExpression) -> str | None:
    """`model` for `model`, `model.eval()`, `model.eval().float()`: methods that return the
    module itself (`model.decode(z).cpu()` moves an output, not the model)."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value not in _MODULE_METHODS:
            return None
        expr = expr.func.value
    return dotted_name(expr)


def _prepared_loader(facts: Facts, loop, prepared: set[str], placed: frozenset[int], depth: int = 0) -> bool:
    """The loop draws from a prepared dataloader: the name is prepared and bound to the
    prepared object here, or it is a parameter and every call in the file passes one."""
    name = loop.iter_name
    scope = loop.scope
    if isinstance(scope, cst.FunctionDef) and name in facts.params.get(id(scope), ()):
        return callers_pass_prepared(facts, scope, name, prepared, placed, depth)
    if name not in prepared:
        return False
    binding = _reaching(facts, name, scope, facts.order.get(loop.node, 0))
    return binding is None or id(binding) in placed


def callers_pass_prepared(
    facts: Facts, function: cst.FunctionDef, param: str, prepared, placed, depth: int = 0, called_as: str | None = None,
) -> bool:
    """Every call of `function` in the file hands `param` a name bound to a prepared object
    there (or its own parameter that its callers do); True with no call at all.
    `called_as`: a class's name, for its `__init__` (called as `Solver(loader, model)`)."""
    from migrator.analysis.reach import CALLERS_STUB

    callee = called_as or function.name.value
    calls = [c for c in facts.calls if isinstance(c.node.func, cst.Name) and c.node.func.value == callee]
    if not calls and CALLERS_STUB in facts.functions:
        return False  # a run of several files shows every caller: none of them passes one
    if not calls or depth > 3:
        return True  # called from elsewhere: trust the caller, as the batch rules always did
    params = function.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)][1 if called_as else 0:]
    for c in calls:
        value = next((a.value for a in c.node.args if a.keyword is not None and a.keyword.value == param), None)
        if value is None and param in positional:
            plain = [a for a in c.node.args if a.keyword is None and a.star == ""]
            index = positional.index(param)
            value = plain[index].value if index < len(plain) else None
        name = dotted_name(value) if value is not None else None
        if name is None:
            return False
        if isinstance(c.scope, cst.FunctionDef) and name in facts.params.get(id(c.scope), ()):
            if not callers_pass_prepared(facts, c.scope, name, prepared, placed, depth + 1):
                return False
            continue
        if name not in prepared:
            return False
        binding = _reaching(facts, name, c.scope, facts.order.get(c.node, 0))
        if binding is not None and id(binding) not in placed:
            return False
    return True


def _is_prepared_construction(call: cst.Call, prepared_values: set[int], parent, imports: ImportTable | None = None) -> bool:
    """`model = Net().to(device)`: the move sits in the value chain of a prepared binding,
    or in the module a hand-made wrap of one receives (`self.model = DDP(model.to(gpu),
    ...)`: the wrap goes, and prepare() places what is left)."""
    from migrator.analysis.distributed import WRAPPERS

    current: cst.CSTNode | None = call
    while current is not None:
        if id(current) in prepared_values:
            return True
        up = parent(current)
        if isinstance(up, cst.Arg) and up.keyword is None and imports is not None:
            wrap = parent(up)
            if isinstance(wrap, cst.Call) and wrap.args and wrap.args[0] is up and imports.qualify(wrap.func) in WRAPPERS:
                current = wrap
                continue
        if not (isinstance(up, cst.Attribute) or (isinstance(up, cst.Call) and up.func is current)):
            return False
        current = up
    return False


def _from_batch(move: DeviceMove, batch: set[str], parent) -> bool:
    receiver = move.receiver
    while isinstance(receiver, (cst.Subscript, cst.Attribute)):
        if dotted_name(receiver) in batch:
            return True
        receiver = receiver.value
    name = dotted_name(receiver)
    if name in batch:
        return True
    current = parent(move.call)
    while current is not None and not isinstance(current, cst.BaseStatement):
        if isinstance(current, (cst.DictComp, cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            comp = current.for_in
            targets = {dotted_name(e.value) for e in comp.target.elements} if isinstance(comp.target, cst.Tuple) else {dotted_name(comp.target)}
            source = comp.iter
            if isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute) and source.func.attr.value in {"items", "values"}:
                source = source.func.value
            if name in targets and dotted_name(source) in batch:
                return True
        current = parent(current)
    return False


def literal_device(move: DeviceMove, imports: ImportTable) -> bool:
    """The move names its device in the code: `.cuda()`, `.cuda(0)`, `.to("cuda:0")`,
    `.to(0)`, `.to(torch.device("cuda"))`, not through a variable."""
    func = move.call.func
    arg = move.device_arg
    if isinstance(func, cst.Attribute) and func.attr.value == "cuda" and arg is None:
        return True
    if isinstance(arg, cst.Integer):
        return True
    if isinstance(arg, cst.SimpleString):
        return str(arg.evaluated_value).startswith(_DEVICE_STRINGS)
    if isinstance(arg, cst.Call) and imports.qualify(arg.func) == "torch.device":
        return bool(arg.args) and all(isinstance(a.value, (cst.SimpleString, cst.Integer)) for a in arg.args) and (
            not isinstance(arg.args[0].value, cst.SimpleString) or str(arg.args[0].value.evaluated_value) != "cpu"
        )
    return _settings_constant(arg, imports)


def _settings_constant(arg: cst.BaseExpression | None, imports: ImportTable) -> bool:
    """`config.DEVICE` of an imported settings module (`import config`, `DEVICE = "cuda"`
    there): a device fixed in another file, as hand-picked as a literal here."""
    dotted = dotted_name(arg) if arg is not None else None
    if dotted is None or dotted.count(".") != 1:
        return False
    head, attribute = dotted.split(".")
    qualified = imports.qualify(arg)
    return attribute.isupper() and attribute.lower() == "device" and qualified is not None and qualified.split(".")[0] == head and head not in ("torch",)
