"""What rules need to know about one script, computed once per pass; rules only read it.

Nothing here edits the tree. `analyze()` runs one collecting traversal plus LibCST's
parent and position metadata, then derives roles, the training block, the prepare plan,
device variables and moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper

from migrator.analysis.branches import Audience, ProcessBranches, RankBranch
from migrator.analysis.collect import Binding, Facts, NodeTables, collect, node_tables
from migrator.analysis.distributed import local_rank_names
from migrator.analysis.spawn import worker_rank_names
from migrator.analysis.device_choice import chosen_again_in, options_guard
from migrator.analysis.device import (
    DeviceMove,
    DeviceVariable,
    device_move,
    device_variables,
    droppable_moves,
    prepared_bindings,
)
from migrator.analysis.manual_update import hand_update_block, hand_updated_models
from migrator.analysis.meters import meter_classes
from migrator.analysis.loop import Block, backward_loops, enclosing_block, training_functions
from migrator.analysis.names import ImportTable, dotted_name
from migrator.analysis.patterns import Patterns, find_patterns
from migrator.analysis.whole_loaders import loaders_fed_whole
from migrator.analysis.positions import positions as module_positions
from migrator.analysis.plan import LenUse, PreparePlan, len_uses, make_plan
from migrator.analysis.reach import accelerator_at, accelerator_home
from migrator.analysis.unreached import receives_accelerator
from migrator.analysis.roles import Role, RoleTable, assign_roles, module_classes, peel_moves, returned_values, role_of_value
from migrator.analysis.walk import descendants

ACCELERATOR_NAME = "accelerator"

__all__ = [
    "ACCELERATOR_NAME",
    "Audience",
    "RankBranch",
    "Block",
    "DeviceMove",
    "DeviceVariable",
    "LenUse",
    "PreparePlan",
    "Role",
    "ScriptAnalysis",
    "SetupPlan",
    "analyze",
    "dotted_name",
]


@dataclass(frozen=True, eq=False)
class SetupPlan:
    """Where `accelerator = Accelerator()` goes: before `before` in `block`."""

    block: Block
    before: cst.BaseStatement


@dataclass(frozen=True, eq=False)
class PrepareCall:
    """An existing `... = accelerator.prepare(...)`."""

    call: cst.Call
    statement: cst.CSTNode
    args: tuple[str | None, ...]
    targets: tuple[str | None, ...]


@dataclass(frozen=True, eq=False)
class ScriptAnalysis:
    """Read-only facts about one module. Every node it mentions belongs to `module`."""

    module: cst.Module
    facts: Facts
    roles: RoleTable
    accelerator_names: tuple[str, ...]
    prepare_calls: tuple[PrepareCall, ...]
    training_block: Block | None
    first_training_use: int | None
    setup: SetupPlan | None
    plan: PreparePlan | None
    device_variables: tuple[DeviceVariable, ...]
    device_moves: tuple[DeviceMove, ...]
    droppable_moves: frozenset[int]
    surviving_device_uses: Mapping[str, int]
    lens: tuple[LenUse, ...]
    branches: ProcessBranches  # who runs what on N processes; which calls are collectives
    _positions: "_Lazy"  # resolved on first position() call
    _parents: Mapping[cst.CSTNode, cst.CSTNode]
    _by_type: Mapping[str, list[cst.CSTNode]]
    _order: Mapping[cst.CSTNode, int]
    patterns: Patterns | None = None  # hand-written AMP, accumulation, distribution, metrics
    _tables: NodeTables | None = None  # for nodes_under()

    # lookups ---------------------------------------------------------------------
    @property
    def imports(self) -> ImportTable:
        return self.facts.imports

    def top_level_name(self, qualified: str) -> str | None:
        """A name a module-level import binds to `qualified` (`torch`, `th`): usable in
        every function of the file, unlike one imported inside a function (the callers'
        stub of a run of several files imports torch for itself)."""
        table = ImportTable()
        for statement in self.module.body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        table.add(small)
        return next(iter(table.local_names_for(qualified)), None)

    @property
    def accelerator(self) -> str:
        """The name migrated code uses for the Accelerator: `self.accelerator` when the
        class whose method sets up training will own it."""
        if self.accelerator_names:
            return self.accelerator_names[0]
        owner = self.setup.block.owner if self.setup is not None else None
        if isinstance(owner, cst.FunctionDef) and id(owner) in self.facts.method_of:
            return f"self.{ACCELERATOR_NAME}"
        return ACCELERATOR_NAME

    def accelerator_at(self, node: cst.CSTNode) -> str | None:
        """How code at `node` reaches the Accelerator, or None where it cannot (reach.py)."""
        return accelerator_at(self, node)

    def accelerator_call(self) -> cst.Call | None:
        """The existing `Accelerator(...)` call, for rules that add an option to it."""
        home = accelerator_home(self)
        return home.call if home is not None else None

    @property
    def has_accelerator(self) -> bool:
        return bool(self.accelerator_names)

    @property
    def migrating(self) -> bool:
        """True when the file has or is about to get an Accelerator."""
        return self.has_accelerator or self.setup is not None

    @property
    def prepared(self) -> frozenset[str]:
        """Names that are (or by the plan will be) returned by prepare()."""
        names = {t for p in self.prepare_calls for t in p.targets if t}
        if self.plan is not None:
            names |= self.plan.names
        return frozenset(names)

    def position(self, node: cst.CSTNode) -> CodeRange:
        """Where `node` is (1-based lines, 0-based columns). Resolved on first use: a
        clean file, with nothing to report, never pays for position tracking."""
        return self._positions.get()[node]

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def order(self, node: cst.CSTNode) -> int:
        """Document order (pre-order index): for "does this come after that?" questions,
        without paying for positions."""
        return self._order[node]

    def nodes(self, type_name: str) -> list[cst.CSTNode]:
        """Every node of one type (e.g. "Call"), in document order, without a walk."""
        return self._by_type.get(type_name, [])

    @property
    def parents(self) -> Mapping[cst.CSTNode, cst.CSTNode]:
        """child → parent for every node but the module."""
        return self._parents

    def nodes_under(self, node: cst.CSTNode, type_name: str) -> list[cst.CSTNode]:
        """Every node of one type inside `node` (itself included), in document order,
        without a walk."""
        assert self._tables is not None
        return self._tables.under(node, type_name)

    def statement_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The smallest statement (a small statement, or a compound one) around `node`."""
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(
            current, (cst.BaseSmallStatement, cst.BaseCompoundStatement)
        ):
            current = self.parent(current)
        return current

    def line_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The whole statement line around `node` (SimpleStatementLine or compound)."""
        current = self.statement_of(node)
        if isinstance(current, cst.BaseSmallStatement):
            return self.parent(current)
        return current

    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The nearest enclosing FunctionDef, or the Module."""
        current = self.parent(node)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
            current = self.parent(current)
        return current or self.module

    def binds(self, scope: cst.CSTNode, name: str) -> bool:
        """Whether `scope` binds `name` (assignment, loop target or parameter)."""
        if isinstance(scope, cst.FunctionDef) and name in self.facts.params.get(id(scope), ()):
            return True
        return any(b.scope is scope and b.name == name for b in self.facts.bindings)


def _local_meter_classes(by_type) -> frozenset[str]:
    """This file's running-meter classes (meters.py), read only from classes with an `update`."""
    classes = [
        c for c in by_type.get("ClassDef", ())
        if any(isinstance(s, cst.FunctionDef) and s.name.value == "update" for s in getattr(c.body, "body", ()))
    ]
    if not classes:
        return frozenset()
    return meter_classes("\n".join(cst.Module([]).code_for_node(c) for c in classes))


def analyze(
    wrapper: MetadataWrapper, *, batch_stepped: frozenset[str] = frozenset(),
    loader_calls: dict[str, tuple[int, ...]] | None = None, unused_models: dict[str, str] | None = None,
    distribution_helpers: dict[str, list] | None = None, unthreaded_calls: frozenset[str] = frozenset(),
    argument_roles: dict[str, dict[str, str]] | None = None, meter_calls: frozenset[str] = frozenset(),
    called_elsewhere: frozenset[str] = frozenset(), iterators: frozenset[str] = frozenset(),
    training_calls: frozenset[str] = frozenset(), sharded_calls: frozenset[str] = frozenset(),
    main_flags: frozenset[str] = frozenset(),
) -> ScriptAnalysis:
    """Compute the analysis of `wrapper.module` (built with unsafe_skip_copy).
    `batch_stepped`: schedulers handed to a function of another file of the run that steps
    them per batch (migrator/project/), so they are prepared; `loader_calls`: calls of
    functions of other files of the run that return DataLoaders (roles.assign_roles);
    `unused_models`: model classes of other files of the run whose parameters get no
    gradient (analysis.ddp_options); `distribution_helpers`: calls of other files' distribution
    helpers → [kind, attributes, print helper] (migrator/project/dist_helpers.py);
    `unthreaded_calls`: calls of evaluation functions of other files of the run that get no Accelerator;
    `argument_roles`: calls of functions of other files → position or parameter → role;
    `meter_calls`: calls of other files' running-meter classes (analysis/meters.py);
    `called_elsewhere`: this file's functions other files of the run call (whole_loaders.py);
    `iterators`: parameters callers hand a batch iterator that is no DataLoader (never prepared);
    `training_calls`: calls of other files' training functions (threaded, refused or handed an
    optimizer and a loader): one handed an optimizer and a loader here trains, so the objects
    are prepared before it; `sharded_calls`: calls of other files' functions returning loaders
    a DistributedSampler shards already (kept out of prepare())."""
    module = wrapper.module
    tables = node_tables(module)
    parents, by_type = tables.parents, tables.by_type
    positions = _Lazy(lambda: module_positions(module))
    parent = parents.get
    facts = collect(module)
    facts.by_type, facts.order = tables.by_type, tables.order
    loops_with_backward = backward_loops(facts)
    roles = assign_roles(facts, loops_with_backward, loader_calls, argument_roles, iterators)
    updated = hand_updated_models(facts) if not roles.names(Role.OPTIMIZER) else []
    for name in updated:  # no optimizer: the model a loop updates by hand trains (manual_update.py)
        roles.roles.setdefault(name, Role.MODEL)
    acc_names = _accelerator_names(facts)
    prepare_calls = _prepare_calls(facts, acc_names, parent)
    block, wrapped_here = _training_block(facts, roles, parent)
    if block is not None and isinstance(block.scope, cst.FunctionDef) and receives_accelerator(facts, block.scope):
        block = None  # migrated already: its caller creates the Accelerator and prepares
    if block is None and updated:
        block = hand_update_block(facts, updated, parent)
    first_use = _first_training_use(facts, block, loops_with_backward, parent, _training_calls(facts, roles, training_calls)) if block else None
    lens = len_uses(facts, roles, block, parent)
    plan = None
    # an Accelerator made by hand and nothing prepared anywhere (no `.prepare(` on any receiver): planned too
    unprepared = not acc_names or not any(
        isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value.startswith("prepare") for c in facts.calls
    )
    if block is not None and not prepare_calls and unprepared:
        plan = make_plan(facts, roles, block, first_use, lens, parent, batch_stepped, unthreaded_calls, sharded_calls)
    prepared = {t for p in prepare_calls for t in p.targets if t} | (plan.names if plan else set())
    facts.whole_loaders = loaders_fed_whole(facts, roles, prepare_calls, plan, parent, called_elsewhere)
    dev_vars = device_variables(facts)
    worker_ranks = worker_rank_names(facts, parent)
    dev_names = {v.name for v in dev_vars} | {"device"} | local_rank_names(facts) | worker_ranks
    moves = [m for c in facts.calls if (m := device_move(c.node, dev_names, facts.imports))]
    placed = prepared_bindings(facts, prepare_calls, plan, parent)
    droppable = droppable_moves(facts, roles, moves, prepared, placed, parent)
    surviving = _surviving_uses(facts, dev_vars, moves, droppable)
    main_calls = frozenset(spelling for spelling, (kind, *_) in (distribution_helpers or {}).items() if kind == "is_main_process")
    branches = ProcessBranches(facts, acc_names, parent, bool(prepare_calls), worker_ranks, main_calls, main_flags)
    patterns = find_patterns(
        module, facts, roles, loops_with_backward, frozenset(prepared), parent, branches.audience_of_test,
        frozenset(droppable), block.scope if block is not None else None, unused_models, distribution_helpers,
        meter_calls | _local_meter_classes(by_type),
    )
    setup = None
    if block is not None and not acc_names:
        home = _home_of_wrapping_class(facts, block, parent) if wrapped_here else block
        home = _home_where_the_group_formed(facts, home, parent, patterns.option_names | patterns.option_attributes)
        setup = _setup_plan(module, home, dev_vars, surviving, facts, patterns.option_names, patterns.option_attributes)
    return ScriptAnalysis(
        module=module,
        facts=facts,
        roles=roles,
        accelerator_names=acc_names,
        prepare_calls=prepare_calls,
        training_block=block,
        first_training_use=first_use,
        setup=setup,
        plan=plan,
        device_variables=tuple(dev_vars),
        device_moves=tuple(moves),
        droppable_moves=frozenset(droppable),
        surviving_device_uses=surviving,
        lens=tuple(lens),
        branches=branches,
        _positions=positions,
        _parents=parents,
        _by_type=by_type,
        _order=tables.order,
        _tables=tables,
        patterns=patterns,
    )


class _Lazy:
    """A value computed on first `get()` and kept."""

    def __init__(self, compute: Callable[[], Mapping]) -> None:
        self._compute = compute
        self._value: Mapping | None = None

    def get(self) -> Mapping:
        if self._value is None:
            self._value = self._compute()
        return self._value


def _accelerator_names(facts: Facts) -> tuple[str, ...]:
    names = []
    for b in facts.bindings:
        value = b.value
        if isinstance(value, cst.Call):
            qualified = facts.imports.qualify(value.func) or dotted_name(value.func) or ""
            if qualified.split(".")[-1] == "Accelerator" and b.name not in names:
                names.append(b.name)
    return tuple(names)


def _prepare_calls(facts: Facts, acc_names, parent) -> tuple[PrepareCall, ...]:
    out = []
    for c in facts.calls:
        if c.func and c.func.rpartition(".")[0] in acc_names and c.func.endswith(".prepare"):
            stmt = c.node
            while stmt is not None and not isinstance(stmt, cst.BaseSmallStatement):
                stmt = parent(stmt)
            targets: tuple[str | None, ...] = ()
            if isinstance(stmt, cst.Assign) and stmt.value is c.node:
                t = stmt.targets[0].target
                elements = t.elements if isinstance(t, (cst.Tuple, cst.List)) else [t]
                targets = tuple(dotted_name(e.value if isinstance(e, cst.BaseElement) else e) for e in elements)
            args = tuple(dotted_name(a.value) for a in c.node.args)
            out.append(PrepareCall(c.node, stmt, args, targets))
    return tuple(out)


def _training_block(facts: Facts, roles: RoleTable, parent) -> tuple[Block | None, bool]:
    """Where the first optimizer is constructed (`torch.optim.SGD(...)`), rather than where
    one is merely stored (`self.optimizer = optimizer` in a Trainer that receives it); but
    where the model is wrapped for distribution by hand beside the optimizer, there (the
    second value says so)."""
    optimizers = [b for b in facts.bindings if roles.of(b.name) is Role.OPTIMIZER]
    wrap = _wrap_block(facts, roles, parent, optimizers)
    if wrap is not None:
        return wrap, True
    local_models = module_classes(facts)
    optimizers.sort(key=lambda b: role_of_value(b.element or b.value, facts.imports, local_models) is not Role.OPTIMIZER)
    for b in optimizers:
        block = enclosing_block(b.statement, parent)
        if block is not None and _in_an_optimizer_class(facts, block):
            continue
        home = _caller_of_factory(facts, roles, block, b.name, parent) if block is not None else None
        if home is not None:
            return home, False
    return None, False


def _in_an_optimizer_class(facts: Facts, block: Block) -> bool:
    """A method of a class built on torch's Optimizer (pytorch-a2c's KFACOptimizer, keeping
    an SGD inside for its own step): an optimizer its user builds, never a set-up."""
    cls = facts.method_of.get(id(block.scope))
    return cls is not None and any(
        (facts.imports.qualify(b.value) or "") in ("torch.optim.Optimizer", "torch.optim.optimizer.Optimizer")
        for b in cls.bases
    )


def _caller_of_factory(facts: Facts, roles: RoleTable, block: Block, optimizer: str, parent) -> Block | None:
    """`def define_optimizer(g_model, d_model, config): ... return g_optimizer, d_optimizer`,
    called once, from `main()`: the optimizer is built for the caller, whose block holds
    the models, the loop and what the factory returns, so the set-up goes there (prepared
    in the factory, the models it borrows would never reach the caller). A factory nothing
    in this file calls, building no model and running no backward of its own (ConvNeXt's
    optim_factory.py, handed the model), builds for another file: None, no set-up here."""
    function = block.scope
    if not isinstance(function, cst.FunctionDef) or id(function) in facts.method_of:
        return block
    returned = {n.value for r in returned_values(function) if r is not None for n in _names(r)}
    if optimizer not in returned:
        return block
    name = function.name.value
    calls = [c for c in facts.calls if isinstance(c.node.func, cst.Name) and c.node.func.value == name]
    loads = [load for load in facts.loads if load.name == name]
    builds_models = any(b.scope is function and roles.of(b.name) is Role.MODEL for b in facts.bindings)
    if not loads and not builds_models and not _calls_backward(facts, function):
        return None
    if len(calls) != 1 or len(loads) != 1 or len(facts.functions.get(name, [])) != 1:
        return block  # called from several places, or handed on (`mp.spawn(main_worker, ...)`)
    if not isinstance(parent(calls[0].node), cst.Assign):
        return block  # the caller does not keep what it builds
    caller = enclosing_block(calls[0].node, parent)
    return caller if caller is not None and caller.scope is not function else block


def _calls_backward(facts: Facts, function: cst.FunctionDef) -> bool:
    return any(
        isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == "backward" and c.scope is function
        for c in facts.calls
    )


def _names(node: cst.CSTNode) -> list[cst.Name]:
    return [n for n in descendants(node) if isinstance(n, cst.Name)]


def _home_of_wrapping_class(facts: Facts, block: Block, parent) -> Block:
    """Where the Accelerator is created when prepare() goes where a method wrapped the
    model (`Trainer.__init__`): the module-level function that builds every instance of
    that class (`main()`, where the process group was joined), so the class receives it
    as `self.accelerator` (reach.injected_classes); else the method itself."""
    cls = facts.method_of.get(id(block.scope)) if isinstance(block.scope, cst.FunctionDef) else None
    if cls is None:
        return block
    name = cls.name.value
    calls = [c for c in facts.calls if isinstance(c.node.func, cst.Name) and c.node.func.value == name]
    loads = [load for load in facts.loads if load.name == name]
    scopes = {id(c.scope) for c in calls}
    if not calls or len(loads) != len(calls) or len(scopes) != 1:
        return block
    scope = calls[0].scope
    if not isinstance(scope, cst.FunctionDef) or not isinstance(facts.scope_of_function.get(id(scope)), cst.Module):
        return block
    if id(scope) in facts.method_of:
        return block
    home = enclosing_block(calls[0].node, parent)
    return home if home is not None and home.scope is scope else block


def _home_where_the_group_formed(facts: Facts, block: Block, parent, needs) -> Block:
    """Where the Accelerator is created when a function forms the process group by hand
    and then calls the function that sets up training (lufficc/SSD's `main()`:
    `init_process_group`, a logger set up for rank 0 from `get_rank()`, then `train(cfg,
    args)`): there, since the Accelerator forms the group now, so what runs in between
    still sees it; the training function is handed it (AM002). Only where every name the
    Accelerator's options read is bound there too; else where training is set up."""
    from migrator.analysis.distributed import INIT

    training = block.scope
    if not isinstance(training, cst.FunctionDef) or id(training) in facts.method_of:
        return block
    for init in (c for c in facts.calls if c.qualified == INIT):
        scope = init.scope
        if not isinstance(scope, cst.FunctionDef) or scope is training or id(scope) in facts.method_of:
            continue
        home = enclosing_block(init.node, parent)
        if home is None or home.scope is not scope:
            continue
        formed = home.index_of(init.node, parent)
        later = [
            c for c in facts.calls
            if isinstance(c.node.func, cst.Name) and c.node.func.value == training.name.value and c.scope is scope
            and (home.index_of(c.node, parent) or -1) > (formed if formed is not None else len(home.body))
        ]
        bound = {b.name for b in facts.bindings if b.scope is scope}
        bound |= {p.name.value for p in scope.params.params + scope.params.kwonly_params}
        if later and set(needs) <= bound:
            return home
    return block


def _wrap_block(facts: Facts, roles: RoleTable, parent, optimizers: list[Binding]) -> Block | None:
    """A function that wraps the model for distribution by hand (`self.model =
    DDP(self.model, ...)`) and holds the optimizer there too is the author's own "ready to
    train" point: the model is built, moved and restored from a snapshot above the wrap,
    so prepare() goes there, wherever the optimizer was constructed (`Trainer.__init__`
    receiving what `main()` built)."""
    from migrator.analysis.distributed import WRAPPERS

    for b in facts.bindings:
        value = b.value
        if b.element is not None or not isinstance(value, cst.Call) or not value.args:
            continue
        if facts.imports.qualify(value.func) not in WRAPPERS or roles.of(b.name) is not Role.MODEL:
            continue
        if not isinstance(b.scope, cst.FunctionDef):
            continue
        if any(o.scope is b.scope for o in optimizers):
            return enclosing_block(b.statement, parent)
    return None


def _training_calls(facts: Facts, roles: RoleTable, calls: frozenset[str]) -> frozenset[str]:
    """Those of `calls` handed an optimizer and a loader here (`do_train(cfg, model,
    train_loader, optimizer, ...)`), not a checkpoint loader handed the optimizer alone."""
    found = set()
    for c in facts.calls:
        if c.func in calls:
            given = {roles.of(dotted_name(a.value) or "") for a in c.node.args}
            if Role.OPTIMIZER in given and Role.DATALOADER in given:
                found.add(c.func)
    return frozenset(found)


def _first_training_use(facts: Facts, block: Block, loops: set[int], parent, training_calls: frozenset[str] = frozenset()) -> int | None:
    """The first statement of the block that trains: a loop with a backward, a call of a
    training function of this file, a backward, or a call of another file's function that
    trains (lufficc/SSD's `model = do_train(cfg, model, ...)`: the objects are prepared
    before it, not after the binding it makes)."""
    trainers = training_functions(facts)
    indices = []
    for loop in facts.loops:
        if id(loop.node) in loops:
            indices.append(block.index_of(loop.node, parent))
    for c in facts.calls:
        func = c.node.func
        if c.func in training_calls:
            indices.append(block.index_of(c.node, parent))
        elif isinstance(func, cst.Name) and func.value in trainers:
            indices.append(block.index_of(c.node, parent))
        elif isinstance(func, cst.Attribute) and func.attr.value == "backward":
            indices.append(block.index_of(c.node, parent))
    # a `def` (or `class`) of the block runs nothing where it stands: its call is the use
    found = [i for i in indices if i is not None and not isinstance(block.body[i], (cst.FunctionDef, cst.ClassDef))]
    return min(found) if found else None


def _surviving_uses(facts: Facts, dev_vars, moves, droppable) -> dict[str, int]:
    dropped_args = {id(m.device_arg) for m in moves if id(m.call) in droppable and m.device_arg is not None}
    names = {v.name for v in dev_vars}
    counts = {n: 0 for n in names}
    for load in facts.loads:
        if load.name in names and id(load.node) not in dropped_args:
            counts[load.name] += 1
    attributes = {n for n in names if "." in n}  # `self.device`: read as attributes, not names
    if attributes:
        targets = {id(b.target) for b in facts.bindings if b.name in attributes}  # `self.device = ...`: not a read
        for node in facts.by_type.get("Attribute", ()):
            if id(node) not in dropped_args and id(node) not in targets and dotted_name(node) in attributes:
                counts[dotted_name(node)] += 1
    return counts


def _setup_plan(
    module: cst.Module, block: Block, dev_vars, surviving, facts: Facts, needs=frozenset(), attributes=frozenset(),
) -> SetupPlan | None:
    """After the preamble, and after the statements binding `needs` (names the
    Accelerator's options read, e.g. `args`) unless a device variable comes first; also
    after those assigning the `attributes` they read (`self.opt = options` for
    `cpu=self.opt.no_cuda`)."""
    for var in dev_vars:
        if surviving.get(var.name) and var.binding.scope is module and block.scope is not module:
            names = tuple(v.name for v in dev_vars if surviving.get(v.name) and v.binding.scope is module)
            if chosen_again_in(block.scope, names, facts):
                break  # `global DEVICE` chosen again where training is set up: the Accelerator stays there
            guard = options_guard(module, needs, facts, names)
            block = Block(module, module, module) if guard is None else Block(guard, guard.body, module)
            break
        method = _sibling_method(facts, var.binding.scope, block.scope) if surviving.get(var.name) else None
        if method is not None:  # `self.device = torch.device(...)` in `__init__`, which builds the models later
            block = Block(method, method.body, method)
            break
    body = list(block.body)
    index = 0
    for i, stmt in enumerate(body):
        if _is_preamble(stmt, first=(i == 0)):
            index = i + 1
        else:
            break
    index = max(index, _after_bindings(block, body, facts, needs | attributes, dev_vars))
    if index >= len(body):
        return None
    return SetupPlan(block, body[index])


def _sibling_method(facts: Facts, device_scope, setup_scope) -> cst.FunctionDef | None:
    """`__init__`, where a class chooses its device (`self.device = torch.device("cuda")`),
    when prepare() goes in another method of the same class (`build_model`, which `__init__`
    calls): the Accelerator is created in `__init__`, before the device, so the device can
    be the Accelerator's and every method reaches `self.accelerator`."""
    if not isinstance(device_scope, cst.FunctionDef) or device_scope is setup_scope or device_scope.name.value != "__init__":
        return None
    owner = facts.method_of.get(id(device_scope))
    if owner is None or facts.method_of.get(id(setup_scope)) is not owner:
        return None
    return device_scope


def _after_bindings(block: Block, body, facts: Facts, needs, dev_vars) -> int:
    bound = {id(b.statement) for b in facts.bindings if b.name in needs and b.scope is block.scope}
    devices = {id(v.binding.statement) for v in dev_vars}
    last = -1
    for i, stmt in enumerate(body):
        if id(stmt) in devices:
            break
        if id(stmt) in bound:
            last = i
    return last + 1


def _is_preamble(stmt: cst.BaseStatement, first: bool) -> bool:
    """Docstring, imports and `global` statements stay above the Accelerator."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if isinstance(small, (cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal)):
            continue
        if first and isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
            continue
        return False
    return True
