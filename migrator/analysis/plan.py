"""Where `accelerator.prepare(...)` goes and what it takes: the prepare plan.

Shared by the prepare rule (which writes it), the device rules (a move of something that
will be prepared can go) and len-before-prepare (which reports what placement could not
fix). The scheduler convention lives here; see rules/am201 for the user-facing story.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import libcst as cst

from migrator.analysis.collect import Binding, Facts
from migrator.analysis.counted_loops import COUNTED, steps_in_counted_loop
from migrator.analysis.loop import Block
from migrator.analysis.manual_update import hand_updated_models
from migrator.analysis.names import code_of, dotted_name
from migrator.analysis.paths import binds_on_every_path, exits
from migrator.analysis.roles import EMA_CLASS, Role, RoleTable, parameter_owners, peel_moves
from migrator.analysis.walk import descendants, walk

_ROLE_ORDER = (Role.MODEL, Role.OPTIMIZER, Role.DATALOADER, Role.SCHEDULER)


@dataclass(frozen=True, eq=False)
class PrepareGroup:
    """One prepare statement: `names` in order, inserted after `after` (a block statement)."""

    names: tuple[str, ...]
    after: cst.BaseStatement
    # (loader, twin): `twin = loader` bound first, for evaluations of the run that need it whole
    twins: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, eq=False)
class LenUse:
    """`len(loader)` of a dataloader, with the block index of its statement (or None)."""

    call: cst.Call
    loader: str
    index: int | None


@dataclass(frozen=True, eq=False)
class PreparePlan:
    block: Block
    groups: tuple[PrepareGroup, ...]
    left_out: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # (name, why)

    @property
    def twins(self) -> dict[str, str]:
        """Prepared loader → the name that keeps it as it was (evaluations read all of it)."""
        return {loader: twin for g in self.groups for loader, twin in g.twins}

    @property
    def names(self) -> set[str]:
        return {n for g in self.groups for n in g.names}

    @property
    def last_in_block(self) -> cst.BaseStatement | None:
        """The statement of the block itself after which the last prepare goes (loaders
        prepared inside a branch come first in `groups`, and are not it)."""
        body = self.block.body
        return next((g.after for g in reversed(self.groups) if any(g.after is s for s in body)), None)


@dataclass
class _Candidate:
    name: str
    role: Role
    index: int
    binding: Binding | None  # None: a parameter of the function that trains


def contains_len_of(expr: cst.CSTNode | None, loaders: set[str], values: dict[str, cst.CSTNode], depth: int = 0) -> bool:
    """Does `expr` use `len(<loader>)`, directly or through a variable computed from it
    (or a function defined beside it, such as a LambdaLR's schedule)?"""
    if expr is None or depth > 4:
        return False
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            if dotted_name(node.func) == "len" and node.args and dotted_name(node.args[0].value) in loaders:
                found = True

        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found
            if node.value in values and contains_len_of(values[node.value], loaders, values, depth + 1):
                found = True

    walk(expr, _Find())
    return found


_PROCESS_COUNT = re.compile(r"(world_?size|(num|n)_?(gpus?|procs|processes|replicas)|ngpus|nprocs|get_world_size\(\))$")


def divided_by_process_count(
    expr: cst.CSTNode | None, values: dict[str, cst.CSTNode], depth: int = 0,
) -> str | None:
    """The first division of `expr` by the process count (`step // args.num_gpus`,
    `total / world_size`, `/ dist.get_world_size()`), as code, directly or through a
    variable computed from it: lufficc/SSD builds its MultiStepLR from
    `milestones = [step // args.num_gpus for step in cfg.SOLVER.LR_STEPS]`."""
    if expr is None or depth > 4:
        return None
    found: list[str] = []

    class _Find(cst.CSTVisitor):
        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if isinstance(node.operator, (cst.Divide, cst.FloorDivide)) and _PROCESS_COUNT.search(code_of(node.right).strip()):
                found.append(code_of(node).strip())

        def visit_Name(self, node: cst.Name) -> None:
            if node.value in values and values[node.value] is not expr:
                inner = divided_by_process_count(values[node.value], values, depth + 1)
                if inner is not None:
                    found.append(inner)

    walk(expr, _Find())
    return found[0] if found else None


# Why a scheduler is left out of prepare() when no step of it is in the file (AM206 says so).
SIZED = "sized from len(dataloader): built after prepare from the per-process length"
# stepped by code this file does not show: per batch or per epoch cannot be seen (SimCLR's
# CosineAnnealingLR(T_max=len(train_loader)) steps per epoch, reader R2)
SIZED_ELSEWHERE = (
    "sized from len(dataloader) and stepped outside this file: if it steps per batch, build it after prepare "
    "from the per-process length; if per epoch, keep it as it is"
)
STEPPED_ELSEWHERE = "stepped outside this file: whether it follows batches or epochs cannot be seen"


STEPPED_BY_CALLERS = "whether it follows batches or epochs depends on where that is called, which cannot be seen here"


def stepped_in_a_helper(facts: Facts, name: str) -> str | None:
    """The function every `name.step()` sits in when none is in a loop and the function
    has no loop at all (MUNIT's `update_learning_rate()`, which train.py calls once per
    iteration): its callers decide how often the scheduler steps."""
    steps = [
        c for c in facts.calls
        if isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == "step" and dotted_name(c.node.func.value) == name
    ]
    scopes = {id(c.scope): c.scope for c in steps}.values()  # two trainer classes of one file may each have one
    if not steps or any(c.loops for c in steps) or not all(isinstance(s, cst.FunctionDef) for s in scopes):
        return None
    names = sorted({s.name.value for s in scopes})  # type: ignore[union-attr]
    if len(names) != 1 or any(isinstance(n, (cst.For, cst.While)) for s in scopes for n in descendants(s)):
        return None
    return names[0]


def stepped_elsewhere(facts: Facts, name: str) -> bool:
    """No `name.step()` in this file, nor of a parameter of a function of this file it is
    handed to, but `name` is handed to a call (a training function of another module steps it)."""
    for c in facts.calls:
        func = c.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "step" and dotted_name(func.value) == name:
            return False
    if steps_through_parameters(facts, name):
        return False
    return any(dotted_name(arg.value) == name for c in facts.calls for arg in c.node.args)


def steps_through_parameters(facts: Facts, name: str) -> list:
    """The `.step()` calls of the parameters `name` is handed to in functions of this file
    (`self.train_epoch(..., scheduler=self.scheduler)`, then `scheduler.step()` there)."""
    handed: set[tuple[int, str]] = set()
    for c in facts.calls:
        func = c.node.func
        callee = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        for function in facts.functions.get(callee or "", ()):
            params = [p for p in facts.params.get(id(function), ()) if p not in ("self", "cls")]
            for i, arg in enumerate(a for a in c.node.args if a.keyword is None and not a.star):
                if dotted_name(arg.value) == name and i < len(params):
                    handed.add((id(function), params[i]))
            for arg in c.node.args:
                if arg.keyword is not None and dotted_name(arg.value) == name:
                    handed.add((id(function), arg.keyword.value))
    return [
        c for c in facts.calls
        if isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == "step"
        and (id(c.scope), dotted_name(c.node.func.value)) in handed
    ]


def scheduler_steps_per_epoch(facts: Facts, name: str, loop_iters: dict[int, str | None], loaders: set[str]) -> bool:
    """True when no `.step()` of this scheduler (or of a parameter of this file's functions
    it is handed to) runs inside a loop over a dataloader."""
    steps = [
        c for c in facts.calls
        if isinstance(c.node.func, cst.Attribute)
        and c.node.func.attr.value == "step"
        and dotted_name(c.node.func.value) == name
    ] + steps_through_parameters(facts, name)
    if not steps:
        return True
    return not any(loop_iters.get(id(loop)) in loaders for c in steps for loop in c.loops)


def len_uses(facts: Facts, roles: RoleTable, block: Block | None, parent: Callable) -> list[LenUse]:
    loaders = set(roles.names(Role.DATALOADER))
    uses = []
    for c in facts.calls:
        if c.func == "len" and len(c.node.args) == 1:
            loader = dotted_name(c.node.args[0].value)
            if loader in loaders:
                index = block.index_of(c.node, parent) if block else None
                uses.append(LenUse(c.node, loader, index))
    return uses


def make_plan(
    facts: Facts,
    roles: RoleTable,
    block: Block,
    first_use: int | None,
    lens: list[LenUse],
    parent: Callable,
    batch_stepped: frozenset[str] = frozenset(),
    unthreaded_calls: frozenset[str] = frozenset(), sharded_calls: frozenset[str] = frozenset(),
) -> PreparePlan | None:
    """Choose what to prepare and where; None when there is nothing to prepare.
    `batch_stepped`: schedulers another file of the run steps per batch;
    `unthreaded_calls`: functions of other files of the run that get no Accelerator;
    `sharded_calls`: functions of other files returning loaders a DistributedSampler shards."""
    loaders = set(roles.names(Role.DATALOADER))
    values = {b.name: b.value for b in facts.bindings if b.scope is block.scope and b.value is not None}
    for name, defs in facts.functions.items():  # `def schedule(step): ... total_steps ...`
        for function in defs:
            if facts.scope_of_function.get(id(function)) is block.scope:
                values.setdefault(name, function.body)
    loop_iters = {id(l.node): l.iter_name for l in facts.loops}
    owners = {o for b in facts.bindings if roles.of(b.name) is Role.OPTIMIZER and isinstance(b.value, cst.Call) for o in parameter_owners(b.value, facts)}
    owners |= _handed_models(facts, roles)
    owners |= _built_together(facts, roles)
    if not roles.names(Role.OPTIMIZER):  # trained by a hand-written update: prepared alone
        owners |= set(hand_updated_models(facts))
    limit = first_use if first_use is not None else len(block.body)
    latest: dict[str, _Candidate] = {}
    for b in facts.bindings:
        role = roles.of(b.name)
        if role is None:
            continue
        index = block.index_of(b.statement, parent)
        if index is None or index >= limit:
            continue
        latest[b.name] = _Candidate(b.name, role, index, b)
    for name in _parameters(facts, block):
        # `def train(loader, encoder, decoder, ...)`: the objects arrive as parameters
        if name not in latest and roles.of(name) in (Role.MODEL, Role.DATALOADER):
            latest[name] = _Candidate(name, roles.of(name), -1, None)
    for name in _attributes_set_before(facts, block, parent):
        # `self.data_loader = data_loader` in `__init__`, then `self.build_model()` making the set-up
        if name not in latest and roles.of(name) is Role.DATALOADER:
            latest[name] = _Candidate(name, Role.DATALOADER, -1, None)
    _follow_aliases(facts, block, latest, owners, parent)
    _prefer_wrapped_over_raw(facts, block, latest, owners)
    chosen: list[_Candidate] = []
    left_out: list[tuple[str, str]] = []
    twins: dict[str, str] = {}
    reading_calls = _with_methods(facts, roles, block.scope, unthreaded_calls)
    for cand in latest.values():
        if cand.role is Role.MODEL and owners and cand.name not in owners and not _owns_a_part(cand.name, owners):
            continue
        if cand.role is Role.MODEL and cand.binding is None and cand.name not in owners:
            continue  # a model parameter is prepared only when an optimizer here updates it
        if cand.role is Role.DATALOADER and (builder := _sharded_by(cand, sharded_calls)):
            left_out.append((cand.name, SHARDED.format(call=builder)))
            continue
        if cand.role is Role.DATALOADER and unthreaded_calls:
            readers = _only_read_by(facts, cand.name, block.scope, reading_calls, parent)
            if readers:
                left_out.append((cand.name, f"read only by {readers}, which no Accelerator reaches: every process reads all of it"))
                continue
            # a twin only for calls AM914 can hand it to (not a method of a built object)
            if "." not in cand.name and _read_by(facts, cand.name, block.scope, unthreaded_calls, parent):
                twins[cand.name] = _free_name(facts, f"{cand.name}_whole")
        if cand.role is Role.SCHEDULER:
            value = cand.binding.element or cand.binding.value
            if contains_len_of(value, loaders, values):
                left_out.append((cand.name, SIZED_ELSEWHERE if stepped_elsewhere(facts, cand.name) else SIZED))
                continue
            if _follows_a_metric(value):
                left_out.append((cand.name, FOLLOWS_A_METRIC))
                continue
            if (how := divided_by_process_count(value, values)) is not None:
                left_out.append((cand.name, PER_PROCESS.format(how=how)))
                continue
            if cand.name not in batch_stepped and steps_in_counted_loop(facts, cand.name, parent):
                left_out.append((cand.name, COUNTED))
                continue
            if cand.name in batch_stepped:
                pass  # stepped per batch by a function of another file of the run
            elif stepped_elsewhere(facts, cand.name):
                left_out.append((cand.name, STEPPED_ELSEWHERE))
                continue
            elif (helper := stepped_in_a_helper(facts, cand.name)) is not None:
                left_out.append((cand.name, f"stepped in `{helper}()`, outside any loop: {STEPPED_BY_CALLERS}"))
                continue
            elif scheduler_steps_per_epoch(facts, cand.name, loop_iters, loaders):
                left_out.append((cand.name, "stepped per epoch: it follows epochs, not batches"))
                continue
        chosen.append(cand)
    if not chosen:
        return None
    chosen.sort(key=lambda c: (_ROLE_ORDER.index(c.role), c.index))
    branches = {}
    for cand in chosen:
        ends = _branch_ends(facts, block, cand, limit, parent) if cand.role is Role.DATALOADER else ()
        if ends:
            branches[cand.name] = ends
    together = [c for c in chosen if c.name not in branches]
    groups = tuple(PrepareGroup((name,), end) for name, ends in branches.items() for end in ends)
    copies = _model_copies(facts, block, {c.name for c in together if c.role is Role.MODEL}, limit, parent)
    groups += _place(block, together, [u for u in lens if u.index is not None], copies) if together else ()
    if twins:
        groups = tuple(
            PrepareGroup(g.names, g.after, tuple((n, twins[n]) for n in g.names if n in twins)) for g in groups
        )
    return PreparePlan(block, groups, tuple(left_out))


def _branch_ends(facts: Facts, block: Block, cand: _Candidate, limit: int, parent: Callable) -> tuple[cst.BaseStatement, ...]:
    """Where a dataloader bound on some paths only is prepared: after the last statement
    of each branch that binds it (paths.py says why); () when it is bound on every path,
    or when a binding sits in a loop (prepared with the others; the verifier decides)."""
    if cand.binding is None or cand.index < 0:
        return ()
    if any(binds_on_every_path(s, cand.name) for s in block.body[: cand.index + 1]):
        return ()
    ends: list[cst.BaseStatement] = []
    for b in facts.bindings:
        index = block.index_of(b.statement, parent) if b.name == cand.name and b.scope is block.scope else None
        if index is None or index >= limit:
            continue
        end = _branch_end(b.statement, block, parent)
        if end is None:
            return ()
        if not any(end is e for e in ends):
            ends.append(end)
    return tuple(ends)


def _branch_end(statement: cst.CSTNode, block: Block, parent: Callable) -> cst.BaseStatement | None:
    """The last statement of the branch holding `statement` (`statement` itself when the
    branch ends by leaving); None when a loop or a nested definition lies between."""
    branch = parent(statement)
    if not isinstance(branch, cst.IndentedBlock) or branch is block.holder:
        return None
    node = branch
    while node is not None and node is not block.holder:
        if isinstance(node, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        node = parent(node)
    if node is None:
        return None
    last = branch.body[-1]
    return statement if exits(last) else last


def _read_by(facts: Facts, name: str, scope, calls: frozenset[str], parent: Callable) -> bool:
    """Some read of the loader in `scope` is an argument of one of `calls`."""
    for load in facts.loads:
        if load.name != name or load.scope is not scope:
            continue
        arg = parent(load.node)
        call = parent(arg) if isinstance(arg, cst.Arg) else None
        if isinstance(call, cst.Call) and dotted_name(call.func) in calls and arg.value is load.node:
            return True
    return False


def _with_methods(facts: Facts, roles: RoleTable, scope, calls: frozenset[str]) -> frozenset[str]:
    """`calls` and the methods called on what they build here: `evaluator = Evaluator(model)`,
    then `evaluator.evaluate(val_loader, ...)` reads the loader for a class of another file
    that gets no Accelerator (open-reid). An object built with an optimizer, or a method
    handed one, trains: not a reader of this kind."""
    if not calls:
        return calls

    def trains(call: cst.Call) -> bool:
        return any(roles.of(dotted_name(a.value) or "") is Role.OPTIMIZER for a in call.args)

    built = {
        b.name for b in facts.bindings
        if b.scope is scope and "." not in b.name and isinstance(b.value, cst.Call)
        and dotted_name(b.value.func) in calls and not trains(b.value)
    }
    methods = {
        c.func for c in facts.calls
        if c.scope is scope and c.func is not None and c.func.count(".") == 1 and c.func.split(".")[0] in built
        and not trains(c.node)
    }
    return calls | frozenset(methods)


def _free_name(facts: Facts, name: str) -> str:
    taken = {b.name for b in facts.bindings} | {l.name for l in facts.loads}
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}{n}", n + 1
    return candidate


def _only_read_by(facts: Facts, name: str, scope, calls: frozenset[str], parent: Callable) -> str | None:
    """`validate(val_loader, model)` where `validate`, a function of another file of the run,
    cannot take the Accelerator (a caller outside the run): when every read of the loader in
    `scope` is an argument of such calls, their names (it then stays unprepared, so what
    they compute covers the whole data on every process); else None."""
    readers: list[str] = []
    loads = [l for l in facts.loads if l.name == name and l.scope is scope]
    for load in loads:
        arg = parent(load.node)
        call = parent(arg) if isinstance(arg, cst.Arg) else None
        spelling = dotted_name(call.func) if isinstance(call, cst.Call) else None
        if spelling not in calls:
            return None
        readers.append(f"`{spelling}`")
    return ", ".join(dict.fromkeys(readers)) or None


def _sharded_by(cand: _Candidate, sharded_calls: frozenset[str]) -> str | None:
    """The call of another file's loader builder that binds `cand`, when that builder
    shards with a DistributedSampler already (lufficc/SSD's `make_data_loader(cfg,
    distributed=args.distributed, max_iter=...)`): prepared, it would be sharded again."""
    value = cand.binding.value if cand.binding is not None else None
    name = dotted_name(value.func) if isinstance(value, cst.Call) else None
    return name if name in sharded_calls else None


SHARDED = (
    "built by `{call}(...)` with a DistributedSampler already: each process reads its own share, "
    "and prepared it would be sharded again"
)
PER_PROCESS = (
    "sized by the process count already ({how}): it counts this process's steps, and prepared it would advance "
    "once per process on each step"
)
FOLLOWS_A_METRIC = "a ReduceLROnPlateau steps on a metric, once per call: prepared, it would step once per process"


def _handed_models(facts: Facts, roles: RoleTable) -> set[str]:
    """`optimizer = create_optimizer(args, model_without_ddp)`: an optimizer built by a
    helper from a model it is handed owns that model's parameters (so a loss module built
    beside it, holding a teacher network, is not taken for something to train). A helper
    that is handed an optimizer too restores it (a resume) and says nothing of its owner."""
    out: set[str] = set()
    for b in facts.bindings:
        value = b.element if b.element is not None else b.value
        if roles.of(b.name) is not Role.OPTIMIZER or not isinstance(value, cst.Call) or parameter_owners(value, facts):
            continue
        if any(roles.of(dotted_name(arg.value)) is Role.OPTIMIZER for arg in value.args):
            continue  # `..., g_optimizer, ... = load_resume_state_dict(g_model, ema_model, g_optimizer, ...)`: restored, not built
        for arg in value.args:
            name = dotted_name(arg.value)
            if name and roles.of(name) is Role.MODEL:
                out.add(name)
            elif name:
                out |= _models_aliased(facts, roles, name)
    return out


def _models_aliased(facts: Facts, roles: RoleTable, name: str) -> set[str]:
    """`model_without_ddp = model` (or `= model.module`): the models `name` stands for."""
    out = set()
    for b in facts.bindings:
        source = dotted_name(b.value) if b.name == name and b.value is not None else None
        if source and roles.of(source.removesuffix(".module")) is Role.MODEL:
            out.add(source.removesuffix(".module"))
    return out


def _follows_a_metric(value: cst.BaseExpression | None) -> bool:
    """`ReduceLROnPlateau(optimizer, ...)`: stepped with a metric, never per batch."""
    return isinstance(value, cst.Call) and (dotted_name(value.func) or "").split(".")[-1] == "ReduceLROnPlateau"


def _follow_aliases(facts: Facts, block: Block, latest: dict[str, _Candidate], owners: set[str], parent) -> None:
    """`self.model = model.to(gpu_id)` (or `= DDP(model.to(gpu_id), ...)`, or plainly
    `= model`) in the block: `self.model` is what trains from here on, so it is prepared
    in place of the parameter `model` it was bound from (and it owns what `model` owned).
    Preparing the parameter would leave `self.model` the unwrapped object."""
    from migrator.analysis.roles import peel_moves

    for b in facts.bindings:
        if b.scope is not block.scope or b.element is not None:
            continue
        source = dotted_name(peel_moves(_wrapped_module(facts, b.value))) if b.value is not None else None
        if not source or source == b.name or source not in latest or latest[source].binding is not None:
            continue
        if b.name not in latest:
            index = block.index_of(b.statement, parent) if b.name.startswith("self.") else None
            if index is None:
                continue
            latest[b.name] = _Candidate(b.name, latest[source].role, index, b)
        if source in owners:
            owners.add(b.name)
        del latest[source]


def _prefer_wrapped_over_raw(facts: Facts, block: Block, latest: dict[str, _Candidate], owners: set[str]) -> None:
    """`model_without_ddp = model` ... `model = DDP(model)`; `model_without_ddp =
    model.module`: the optimizer reads the raw alias, but `model` is what trains (and what
    the hand-made wrap wrapped). The two name one module, so `model` is prepared in its
    place; the alias stays the plain module (prepare() wraps that same object)."""
    for b in facts.bindings:
        value = b.value
        if b.scope is not block.scope or b.element is not None or not isinstance(value, cst.Attribute):
            continue
        if value.attr.value != "module" or b.name not in latest or b.name not in owners:
            continue
        source = dotted_name(value.value)
        if source and source != b.name and source in latest and latest[source].role is Role.MODEL:
            owners.add(source)
            del latest[b.name]


def _wrapped_module(facts: Facts, value: cst.BaseExpression) -> cst.BaseExpression:
    """`DDP(model.to(gpu), ...)` → `model.to(gpu)`: what a hand-made wrap receives."""
    from migrator.analysis.distributed import WRAPPERS

    if isinstance(value, cst.Call) and value.args and facts.imports.qualify(value.func) in WRAPPERS:
        return value.args[0].value
    return value


def _parameters(facts: Facts, block: Block) -> tuple[str, ...]:
    """The parameters of the function whose body `block` is (none at module level)."""
    if not isinstance(block.scope, cst.FunctionDef) or block.owner is not block.scope:
        return ()
    return facts.params.get(id(block.scope), ())


def _owns_a_part(model: str, owners: set[str]) -> bool:
    """An optimizer over parts of the model (`model.backbone.parameters()`, `model.classifier
    .parameters()`: DeepLabV3's parameter groups) updates the model: prepared whole, its
    wrapper syncs the gradients of every part."""
    return any(owner.startswith(model + ".") for owner in owners)


def _attributes_set_before(facts: Facts, block: Block, parent: Callable) -> list[str]:
    """The attributes `__init__` sets on every path before it calls the method whose body
    `block` is (`self.data_loader = data_loader`, then `self.build_model()`): bound when the
    set-up there runs, as a parameter would be."""
    method = block.scope
    if not isinstance(method, cst.FunctionDef) or block.owner is not method or method.name.value == "__init__":
        return []
    holder = parent(parent(method)) if parent(method) is not None else None  # IndentedBlock, then the class
    if not isinstance(holder, cst.ClassDef):
        return []
    init = next((s for s in holder.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
    if init is None or not isinstance(init.body, cst.IndentedBlock):
        return []
    body = list(init.body.body)
    calling = next((i for i, s in enumerate(body) if _calls_self_method(s, method.name.value)), None)
    if calling is None:
        return []
    early = {id(s) for s in body[:calling]}
    names = {b.name for b in facts.bindings if b.scope is init and b.name.startswith("self.") and id(b.statement) in early}
    methods = [s for s in holder.body.body if isinstance(s, cst.FunctionDef) and s is not init and s is not method]
    return sorted(n for n in names if _read_only_where_trained(facts, n, methods))


def _read_only_where_trained(facts: Facts, name: str, methods: list[cst.FunctionDef]) -> bool:
    """Every other method that reads `name` calls backward: a loader sharded for them trains
    on its share, while a `test()` reading it would compute (and save on the main process)
    its share alone (stargan's Solver translates every test image)."""
    readers = [m for m in methods if any(dotted_name(a) == name for a in _attributes(m))]
    trains = {id(c.scope) for c in facts.calls if (c.func or "").endswith(".backward")}
    return bool(readers) and all(id(m) in trains for m in readers)


def _attributes(node: cst.CSTNode) -> list[cst.Attribute]:
    found: list[cst.Attribute] = []

    class _Find(cst.CSTVisitor):
        def visit_Attribute(self, attribute: cst.Attribute) -> None:
            found.append(attribute)

    walk(node, _Find())
    return found


def _calls_self_method(statement: cst.CSTNode, name: str) -> bool:
    """`self.<name>()` as a statement of its own."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    return isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and dotted_name(small.value.func) == f"self.{name}"


def _built_together(facts: Facts, roles: RoleTable) -> set[str]:
    """`model, optimizer = build(lr)`: a factory that hands out an optimizer with models
    hands out the models it updates (a loss module built beside them is not one). A
    helper handed them back (`model, ema, optimizer = load_resume(model, ema, optimizer)`)
    says nothing of which model the optimizer updates."""
    out: set[str] = set()
    for b in facts.bindings:
        if roles.of(b.name) is not Role.OPTIMIZER or b.element is not None or not isinstance(b.value, cst.Call):
            continue
        handed = {dotted_name(a.value) for a in b.value.args}
        together = [o for o in facts.bindings if o.statement is b.statement and o is not b and o.value is b.value]
        if together and b.name not in handed:
            out |= {o.name for o in together if roles.of(o.name) is Role.MODEL and o.name not in handed}
    return out


_COPIES = ("copy.deepcopy", "torch.optim.swa_utils.AveragedModel")


def _model_copies(facts: Facts, block: Block, models: set[str], limit: int, parent) -> list[int]:
    """Statements of the block, above its first use, that copy a model to prepare (`ema =
    copy.deepcopy(model)`, `AveragedModel(model)`, a `ModelEma(model)`): a copy of the
    prepared model would be a copy of its DDP wrapper (a checkpoint whose keys start with
    `module.` on N processes only), so prepare() goes below them."""
    out = []
    for b in facts.bindings:
        value = b.value
        if b.scope is not block.scope or not isinstance(value, cst.Call) or not value.args or value.args[0].keyword:
            continue
        qualified = facts.imports.qualify(value.func) or dotted_name(value.func) or ""
        if qualified not in _COPIES and not EMA_CLASS.search(qualified.rsplit(".", 1)[-1]):
            continue
        if dotted_name(peel_moves(value.args[0].value)) in models:
            index = block.index_of(b.statement, parent)
            if index is not None and index < limit:
                out.append(index)
    return out


def _place(block: Block, chosen: list[_Candidate], lens: list[LenUse], copies: list[int] = ()) -> tuple[PrepareGroup, ...]:
    """One group after the last definition (and after the copies of a model made before
    training); when a `len(loader)` sits above that, the dataloaders defined before the
    `len()` get a prepare statement of their own."""
    anchor = max([c.index for c in chosen] + list(copies))
    first_len = min((u.index for u in lens), default=None)
    if first_len is None or first_len > anchor:
        return (PrepareGroup(tuple(c.name for c in chosen), block.body[anchor]),)
    early = [c for c in chosen if c.role is Role.DATALOADER and c.index < first_len]
    rest = [c for c in chosen if c not in early]
    if early and rest:
        return (
            PrepareGroup(tuple(c.name for c in early), block.body[max(c.index for c in early)]),
            PrepareGroup(tuple(c.name for c in rest), block.body[max(c.index for c in rest)]),
        )
    return (PrepareGroup(tuple(c.name for c in chosen), block.body[anchor]),)
