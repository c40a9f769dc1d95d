"""Distribution written by hand: what the runtime now does itself, and what it replaces.

Finds `nn.DataParallel(...)`/`DistributedDataParallel(...)` wrapping, `model.module`,
`DistributedSampler`s and their `set_epoch`, `init_process_group`/`set_device`,
`LOCAL_RANK`/`dist.get_rank()` plumbing, rank tests (`if rank == 0:`), barriers,
all-reduces and `mp.spawn`. Statements that simply go share removal fixes (see
removal.py). Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import libcst as cst

from migrator.analysis.collect import Binding, Facts
from migrator.analysis.names import call_argument as _arg, code_of as _code, dotted_name
from migrator.analysis.removal import import_removals, removal_unit, shared_removals
from migrator.analysis.roles import Role, RoleTable, peel_moves
from migrator.analysis.spawn import (
    LaunchedWorker, Spawn, find_spawns, inside_any, judge_worker_reads, launched_workers, master_env_lines,
)
from migrator.edits import Edit, Fix, ImportChange, remove, replace

Parent = Callable[[cst.CSTNode], "cst.CSTNode | None"]

WRAPPERS = {
    "torch.nn.DataParallel": "DataParallel",
    "torch.nn.parallel.DataParallel": "DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "DataParallel",
    "torch.nn.parallel.DistributedDataParallel": "DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel": "DistributedDataParallel",
}


def _replica_callback_wrap(qualified: str) -> str | None:
    """`DataParallelWithCallback(model)` of the Synchronized-BatchNorm package (a module
    named `sync_batchnorm`): a DataParallel that also runs its BatchNorm callbacks."""
    parts = qualified.split(".")
    return "DataParallel" if parts[-1] == "DataParallelWithCallback" and "sync_batchnorm" in parts else None


SAMPLERS = {"torch.utils.data.distributed.DistributedSampler", "torch.utils.data.DistributedSampler"}
INIT = "torch.distributed.init_process_group"
DESTROY = "torch.distributed.destroy_process_group"
SET_DEVICE = "torch.cuda.set_device"
BARRIERS = {"torch.distributed.barrier", "torch.distributed.monitored_barrier"}
ALL_REDUCE = "torch.distributed.all_reduce"
# dist queries that keep working unchanged (false or trivially true on one process).
_QUERIES = {"is_available", "is_initialized", "is_nccl_available", "is_gloo_available", "is_torchelastic_launched"}
# What the plumbing reads → the Accelerator property that replaces it.
PLUMBING = {
    "LOCAL_RANK": "local_process_index",
    "RANK": "process_index",
    "WORLD_SIZE": "num_processes",
    "torch.distributed.get_rank": "process_index",
    "torch.distributed.get_world_size": "num_processes",
}
ACCELERATOR_PLUMBING = {"local_process_index", "process_index", "num_processes"}
# Another file's helper (project/dist_helpers.py) of this kind → the Accelerator property it reads.
HELPER_PROPERTIES = {
    "process_index": "process_index", "num_processes": "num_processes",
    "local_process_index": "local_process_index", "is_main_process": "is_main_process",
}
# Imports that hand-made distribution needed and the migrated script may not.
_CLEANED_MODULES = (
    "torch.distributed", "torch.nn.parallel", "torch.utils.data.distributed", "torch.multiprocessing",
    "torch.utils.data.DistributedSampler",
)
# Flags that say "running distributed" in hand-written scripts.
_DISTRIBUTED_FLAGS = {"distributed", "multiprocessing_distributed", "ddp", "use_ddp", "is_distributed"}


@dataclass(frozen=True, eq=False)
class Wrap:
    """`nn.DataParallel(inner, ...)` / `DistributedDataParallel(inner, ...)`.

    `statement` is set when the whole statement goes (`model = DDP(model, ...)`);
    otherwise the call is replaced by `inner`."""

    call: cst.Call
    kind: str
    inner: cst.BaseExpression
    statement: cst.BaseSmallStatement | None


@dataclass(frozen=True, eq=False)
class SamplerArg:
    """`sampler=...` in a DataLoader call: the arg goes, and `shuffle` takes `shuffle`."""

    loader_call: cst.Call
    arg: cst.Arg
    shuffle: str  # code: "True", "False" or an expression


@dataclass(frozen=True, eq=False)
class Sampler:
    """A DistributedSampler bound to `name`: `removable` when every use is one of ours."""

    name: str
    binding: Binding
    statement: cst.BaseSmallStatement
    replacement: cst.BaseExpression | None  # `RandomSampler(ds) if ... else DistributedSampler(ds)` keeps the first
    args: tuple[SamplerArg, ...]
    set_epochs: tuple[cst.BaseSmallStatement, ...]
    blockers: tuple[cst.CSTNode, ...]


@dataclass(frozen=True, eq=False)
class Plumbing:
    """A read of the rank or world size (`int(os.environ["LOCAL_RANK"])`,
    `dist.get_rank()`): replaced by `accelerator.<prop>`, or, when it is a binding nobody
    reads any more, removed with its statement."""

    node: cst.BaseExpression
    prop: str
    statement: cst.BaseSmallStatement | None  # set when the binding can simply go


@dataclass(frozen=True, eq=False)
class RankTest:
    """An expression that holds on the main process only (`main`) or everywhere else."""

    node: cst.BaseExpression
    main: bool


@dataclass(frozen=True, eq=False)
class HelperCall:
    """A statement calling another file's distribution helper (project/dist_helpers.py):
    `utils.init_distributed_mode(args)` ("setup": `attributes` it sets on its argument,
    with their meanings, and the helper it calls to silence print on the other
    processes) or `utils.save_on_master(...)`."""

    call: cst.Call
    statement: cst.Expr
    kind: str
    attributes: tuple[tuple[str, str], ...] = ()
    prints: str = ""


@dataclass(frozen=True, eq=False)
class AllReduce:
    call: cst.Call
    statement: cst.BaseSmallStatement | None
    tensor: cst.BaseExpression | None
    reduction: str | None  # "sum" / "mean"; None: cannot be expressed (`reason`)
    reason: str | None = None


@dataclass(frozen=True, eq=False)
class DistributionFacts:
    wraps: tuple[Wrap, ...] = ()
    module_accesses: tuple[cst.BaseExpression, ...] = ()  # `model.module`, `m.module if hasattr(...) else m`
    samplers: tuple[Sampler, ...] = ()
    inline_samplers: tuple[SamplerArg, ...] = ()
    # `loader.sampler.set_epoch(epoch)` left once every DistributedSampler goes; their one
    # removal Fix also carries the inline samplers' `sampler=` edits
    orphan_set_epochs: tuple[cst.BaseSmallStatement, ...] = ()
    inits: tuple[cst.Call, ...] = ()
    set_devices: tuple[cst.Call, ...] = ()
    destroys: tuple[cst.Call, ...] = ()
    # id(destroy call) → (`def cleanup(): destroy_process_group()`, its bare calls)
    destroy_helpers: dict[int, tuple[cst.FunctionDef, list]] = field(default_factory=dict)
    barriers: tuple[cst.Call, ...] = ()
    all_reduces: tuple[AllReduce, ...] = ()
    helper_calls: tuple[HelperCall, ...] = ()  # calls of another file's set-up helper or save_on_master
    # calls of another file's helper that wraps the model it is handed in DataParallel or DDP
    wrap_helper_calls: tuple[cst.Call, ...] = ()
    plumbing: tuple[Plumbing, ...] = ()
    # `f"cuda:{local_rank}"` given to torch.load's map_location (directly or through a name
    # read only there): this process's device, spelled by hand
    device_strings: tuple[cst.FormattedString, ...] = ()
    rank_tests: tuple[RankTest, ...] = ()
    spawns: tuple[Spawn, ...] = ()  # `mp.spawn(worker, ...)`: converted when `reason` is None
    launched: tuple[LaunchedWorker, ...] = ()  # a spawn's worker called with the launcher's LOCAL_RANK
    master_env: tuple[cst.Assign, ...] = ()  # `os.environ["MASTER_PORT"] = ...` that goes with a spawn
    raw_calls: tuple[cst.Call, ...] = ()  # other torch.distributed calls nobody rewrites
    removals: dict[int, Fix] = field(default_factory=dict)  # id(small statement) → shared Fix
    import_cleanup: tuple[ImportChange, ...] = ()  # imports of torch.distributed & co., dropped once unused

    def removal(self, small: cst.CSTNode) -> Fix | None:
        return self.removals.get(id(small))


def _expr_statement(call: cst.Call, parent: Parent) -> cst.BaseSmallStatement | None:
    up = parent(call)
    return up if isinstance(up, cst.Expr) and up.value is call else None


def _statement(node: cst.CSTNode, parent: Parent) -> cst.BaseSmallStatement | None:
    current = parent(node)
    while current is not None and not isinstance(current, (cst.BaseSmallStatement, cst.BaseStatement)):
        current = parent(current)
    return current if isinstance(current, cst.BaseSmallStatement) else None


class _Builder:
    def __init__(
        self, module: cst.Module, facts: Facts, roles: RoleTable, parent: Parent, rank_audience,
        helpers: Mapping[str, list] | None = None,
    ) -> None:
        self.module = module
        self.helpers = dict(helpers or {})  # `utils.get_rank` → [kind, attributes, print helper]
        self.facts = facts
        self.roles = roles
        self.parent = parent
        self.audience = rank_audience
        self.qualified = {id(c.node): c.qualified or "" for c in facts.calls}
        self.boilerplate: list[cst.BaseSmallStatement] = []
        self.companions: dict[int, list[Edit]] = {}
        self.together: list[list[cst.BaseSmallStatement]] = []
        self.vanishing: set[int] = set()  # nodes the migration removes or replaces whole
        self.loop_targets = {name for loop in facts.loops for name in loop.targets}

    # -- loads of dotted names ----------------------------------------------------------------
    def loads_of(self, name: str, scope: cst.CSTNode | None = None) -> list[cst.CSTNode]:
        """Expressions reading `name` (dotted), outside binding targets."""
        out = []
        targets = {id(b.target) for b in self.facts.bindings}
        for load in self.facts.loads:
            if scope is not None and load.scope is not scope:
                continue
            node: cst.CSTNode = load.node
            while dotted_name(node) != name:
                up = self.parent(node)
                if not (isinstance(up, cst.Attribute) and up.value is node):
                    break
                node = up
            if dotted_name(node) == name and id(node) not in targets:
                out.append(node)
        return out

    # -- wraps --------------------------------------------------------------------------------
    def wraps(self) -> list[Wrap]:
        out = []
        for c in self.facts.calls:
            kind = WRAPPERS.get(c.qualified or "") or _replica_callback_wrap(c.qualified or "")
            inner_arg = _arg(c.node, "module", 0) if kind else None
            if inner_arg is None:
                continue
            inner = inner_arg.value
            statement = None
            small = _statement(c.node, self.parent)
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and peel_moves(small.value) is c.node:
                if dotted_name(small.targets[0].target) == dotted_name(inner) and small.value is c.node:
                    statement = small
                    self.boilerplate.append(small)
            out.append(Wrap(c.node, kind, inner, statement))
        return out

    def module_accesses(self, wrapped: set[str]) -> list[cst.BaseExpression]:
        models = wrapped | (set(self.roles.names(Role.MODEL)) - self._own_wrappers(wrapped))
        out: list[cst.BaseExpression] = []
        taken: set[int] = set()
        for name in models:
            for node in self.loads_of(f"{name}.module"):
                whole = self._unwrap_idiom(node, name)
                if id(whole) not in taken:
                    taken.add(id(whole))
                    out.append(whole)
        return out

    def _own_wrappers(self, wrapped: set[str]) -> set[str]:
        """Models built by another class around a model (`ema = AveragedModel(model)`, timm's
        `ModelEma(model)`): their `.module` is their own attribute, not a DDP wrapper's."""
        out = set()
        models = set(self.roles.names(Role.MODEL))
        for b in self.facts.bindings:
            value = b.value
            if b.name in wrapped or b.element is not None or not isinstance(value, cst.Call) or not value.args:
                continue
            if self.facts.imports.qualify(value.func) in WRAPPERS:
                continue  # `ddp_model = DDP(model)`: DDP's own `.module`
            first = value.args[0]
            if first.keyword is None and dotted_name(peel_moves(first.value)) in models - {b.name}:
                out.add(b.name)
        return out

    def _unwrap_idiom(self, access: cst.CSTNode, name: str) -> cst.BaseExpression:
        """`m.module if hasattr(m, "module") else m` and `getattr(m, "module", m)` as a whole."""
        up = self.parent(access)
        if isinstance(up, cst.IfExp) and up.body is access and dotted_name(up.orelse) == name:
            return up
        return access  # type: ignore[return-value]

    # -- samplers -------------------------------------------------------------------------------
    def sampler_arg(self, loader: cst.Call, arg: cst.Arg, sampler_call: cst.Call | None) -> SamplerArg:
        shuffle = "True"
        if sampler_call is not None:
            given = _arg(sampler_call, "shuffle", 3)
            if given is not None:
                shuffle = _code(given.value)
        return SamplerArg(loader, arg, shuffle)

    def orphan_set_epochs(self, found: list[Sampler], inline: list[SamplerArg]) -> list[cst.BaseSmallStatement]:
        """`loader.sampler.set_epoch(epoch)` / `self.train_data.sampler.set_epoch(epoch)`:
        reached through the loader, so not one of a named sampler's uses. Once every
        DistributedSampler goes (none is kept for another use), the loader's sampler is a
        plain one without `set_epoch`; the prepared loader reshuffles every epoch itself.
        They go in one Fix with the removals they follow."""
        if not (found or inline) or any(s.blockers for s in found):
            return []
        listed = {id(statement) for s in found for statement in s.set_epochs}
        orphans = []
        for c in self.facts.calls:
            func = c.node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "set_epoch"):
                continue
            if not (isinstance(func.value, cst.Attribute) and func.value.attr.value == "sampler"):
                continue
            statement = _expr_statement(c.node, self.parent)
            if statement is not None and id(statement) not in listed:
                orphans.append(statement)
        if orphans:
            self.boilerplate.extend(orphans)
            self.together.append([*orphans, *(s.statement for s in found if s.replacement is None)])
            self.companions.setdefault(id(orphans[0]), []).extend(sampler_arg_edit(a) for a in inline)
        return orphans

    def samplers(self) -> tuple[list[Sampler], list[SamplerArg]]:
        found: list[Sampler] = []
        inline: list[SamplerArg] = []
        loaders = [c.node for c in self.facts.calls if (c.qualified or c.func or "").endswith("DataLoader")]
        for b in self.facts.bindings:
            value = b.element if b.element is not None else b.value
            call, replacement = self._sampler_value(value)
            small = _statement(b.target, self.parent)
            if call is None or not isinstance(small, cst.Assign) or b.element is not None:
                continue
            args, set_epochs, blockers = [], [], []
            for use in self.loads_of(b.name):
                up = self.parent(use)
                arg = up if isinstance(up, cst.Arg) else None
                if arg is not None and arg.keyword is not None and arg.keyword.value == "sampler":
                    loader = self.parent(arg)
                    if isinstance(loader, cst.Call) and loader in loaders:
                        args.append(self.sampler_arg(loader, arg, call))
                        continue
                if isinstance(up, cst.Attribute) and up.attr.value == "set_epoch":
                    statement = _expr_statement(self.parent(up), self.parent)  # type: ignore[arg-type]
                    if statement is not None:
                        set_epochs.append(statement)
                        continue
                if self._in_shuffle_of(use, b.name, loaders) or self._in_none_test(use):
                    continue
                blockers.append(use)
            blockers += self._other_samplers(b.name, b.scope)
            if replacement is None and not blockers:
                self.companions[id(small)] = [sampler_arg_edit(a) for a in args]
                shuffle = args[0].shuffle if args and len({a.shuffle for a in args}) == 1 else None
                group = [small, *set_epochs, *self._none_bindings(b.name, b.scope, shuffle)]
                self.boilerplate.extend(group)
                self.together.append(group)
            found.append(Sampler(b.name, b, small, replacement, tuple(args), tuple(set_epochs), tuple(blockers)))
        for c in self.facts.calls:
            if (c.qualified or "") in SAMPLERS:
                arg = self.parent(c.node)
                loader = self.parent(arg) if isinstance(arg, cst.Arg) else None
                if isinstance(arg, cst.Arg) and arg.keyword is not None and arg.keyword.value == "sampler" and loader in loaders:
                    inline.append(self.sampler_arg(loader, arg, c.node))  # type: ignore[arg-type]
        return found, inline

    def _other_samplers(self, name: str, scope) -> list[cst.CSTNode]:
        """Bindings of the sampler's name to something the Accelerator's sharding does not
        replace (`RASampler(dataset, ...)`, a weighted sampler): the loader's `sampler=`
        must then stay, so the DistributedSampler cannot go."""
        out = []
        for b in self.facts.bindings:
            if b.name != name or b.scope is not scope or b.element is not None:
                continue
            value = b.value
            if isinstance(value, cst.Name) and value.value == "None":
                continue
            if self._sampler_value(value)[0] is not None:
                continue
            qualified = self.facts.imports.qualify(value.func) if isinstance(value, cst.Call) else ""
            if (qualified or "").startswith("torch.utils.data") and (qualified or "").endswith(("RandomSampler", "SequentialSampler")):
                continue
            out.append(b.target)
        return out

    def _none_bindings(self, name: str, scope, shuffle: str = "True") -> list[cst.BaseSmallStatement]:
        """`train_sampler = None` (the single-process branch), or the plain sampler that
        branch builds (`RandomSampler(dataset)` where the DistributedSampler shuffles,
        `SequentialSampler(dataset)` where it does not): goes with the sampler, since the
        loader's `shuffle=` says the same."""
        plain = {"True": "RandomSampler", "False": "SequentialSampler"}.get(shuffle)
        out = []
        for b in self.facts.bindings:
            if b.name != name or b.scope is not scope:
                continue
            value = b.value
            none = isinstance(value, cst.Name) and value.value == "None"
            built = (
                isinstance(value, cst.Call) and plain is not None and len(value.args) == 1
                and (self.facts.imports.qualify(value.func) or "").startswith("torch.utils.data")
                and (self.facts.imports.qualify(value.func) or "").endswith("." + plain)
            )
            if none or built:
                small = _statement(b.target, self.parent)
                if isinstance(small, cst.Assign) and len(small.targets) == 1:
                    out.append(small)
        return out

    def _sampler_value(self, value) -> tuple[cst.Call | None, cst.BaseExpression | None]:
        """(the DistributedSampler call, what stays instead: None to drop the binding)."""
        if isinstance(value, cst.Call) and self.facts.imports.qualify(value.func) in SAMPLERS:
            return value, None
        if isinstance(value, cst.IfExp):
            for mine, other in ((value.body, value.orelse), (value.orelse, value.body)):
                if isinstance(mine, cst.Call) and self.facts.imports.qualify(mine.func) in SAMPLERS:
                    keep = None if (isinstance(other, cst.Name) and other.value == "None") else other
                    return mine, keep
        return None, None

    def _in_shuffle_of(self, use: cst.CSTNode, name: str, loaders: list[cst.Call]) -> bool:
        """`shuffle=(sampler is None)` in a DataLoader call."""
        current = self.parent(use)
        while current is not None and not isinstance(current, cst.Arg):
            current = self.parent(current)
        return (
            isinstance(current, cst.Arg)
            and current.keyword is not None
            and current.keyword.value == "shuffle"
            and self.parent(current) in loaders
        )

    def _in_none_test(self, use: cst.CSTNode) -> bool:
        """`if sampler is not None:` / `if sampler:` guarding a set_epoch."""
        up = self.parent(use)
        node = up if isinstance(up, cst.Comparison) else use
        owner = self.parent(node)
        return isinstance(owner, cst.If) and owner.test is node

    # -- calls ---------------------------------------------------------------------------------
    def calls(self, qualified: set[str] | str) -> list[cst.Call]:
        wanted = {qualified} if isinstance(qualified, str) else qualified
        return [c.node for c in self.facts.calls if (c.qualified or "") in wanted]

    def all_reduces(self) -> list[AllReduce]:
        out = []
        for call in self.calls(ALL_REDUCE):
            statement = _expr_statement(call, self.parent)
            tensor_arg = _arg(call, "tensor", 0)
            op = _arg(call, "op", 1)
            reason = None
            reduction = "sum"
            if op is not None:
                last = (dotted_name(op.value) or "").rsplit(".", 1)[-1]
                reduction = {"SUM": "sum", "AVG": "mean"}.get(last)  # type: ignore[assignment]
                if reduction is None:
                    reason = f"`{_code(op.value)}` has no Accelerator equivalent (reduce() sums or averages)"
            if _arg(call, "async_op", None) is not None or _arg(call, "group", 2) is not None:
                reason = "it uses a process group or async_op the Accelerator does not expose"
            tensor = tensor_arg.value if tensor_arg is not None else None
            if reason is None and (statement is None or tensor is None or dotted_name(tensor) is None and not isinstance(tensor, cst.Subscript)):
                reason = "its result is not a plain statement on a named tensor"
            out.append(AllReduce(call, statement, tensor, reduction if reason is None else None, reason))
        return out

    def plumbing(self, workers: list[tuple[cst.FunctionDef, str]] = (), given: set[int] = frozenset()) -> list[Plumbing]:
        """`workers`: (worker, its parameter holding the process count) of a spawn that
        converts; `given`: ids of the launcher's values passed to a converted worker."""
        out = []
        for node in self.launch_tests():
            if not isinstance(self.parent(node), cst.Assert):
                out.append(Plumbing(node, _LAUNCH_TESTS[launch_test(node)], self._unused_binding(node)))
            self.vanishing.add(id(node))  # the env read inside goes with the whole test, or stays with it
        for c in self.facts.calls:
            node, prop = self._plumbing_read(c.node)
            if node is None or any(p.node is node for p in out) or self._going(node) or id(node) in given:
                continue  # a read inside a rank test or a removed statement goes with it
            out.append(Plumbing(node, prop, self._unused_binding(node)))
        for worker, world in workers:
            for load in self.facts.loads:
                if load.name == world and load.scope is worker and not self._going(load.node):
                    out.append(Plumbing(load.node, "num_processes", self._unused_binding(load.node)))
        for b in self.facts.bindings:
            value = b.value
            if b.element is None and isinstance(value, cst.Comparison) and launch_test(value, accelerator=True):
                statement = self._unused_binding(value)  # `ddp = accelerator.num_processes > 1` nothing reads
                if statement is not None:
                    out.append(Plumbing(value, "num_processes", statement))
            if b.element is None and isinstance(value, cst.Attribute) and value.attr.value in ACCELERATOR_PLUMBING:
                if (dotted_name(value.value) or "").endswith("accelerator"):
                    statement = self._unused_binding(value)
                    if statement is not None:
                        out.append(Plumbing(value, value.attr.value, statement))
        for p in out:
            if p.statement is not None:
                self.boilerplate.append(p.statement)
        return out

    def launch_tests(self) -> list[cst.Comparison]:
        """`int(os.environ.get("RANK", -1)) != -1`, `"RANK" in os.environ`,
        `os.environ.get("LOCAL_RANK") is not None`: whether a launcher started the script,
        read as a whole (its inner env read alone would become a rank compared to -1).
        One in an `assert` (`assert "LOCAL_RANK" in os.environ`) demands a launcher, which
        the count cannot say (one launched process counts 1): the caller leaves it as written."""
        return [
            node for node in self.facts.by_type.get("Comparison", ())  # type: ignore[misc]
            if launch_test(node) is not None and not self._going(node)
        ]

    def _plumbing_read(self, call: cst.Call) -> tuple[cst.BaseExpression | None, str]:
        qualified = self.qualified.get(id(call), "")
        if qualified in PLUMBING:
            return call, PLUMBING[qualified]
        helper = self.helpers.get(dotted_name(call.func) or "")
        if helper is not None and helper[0] in HELPER_PROPERTIES and not call.args:
            return call, HELPER_PROPERTIES[helper[0]]
        if dotted_name(call.func) == "int" and len(call.args) == 1:
            env = _env_name(call.args[0].value)
            if env in PLUMBING:
                return call, PLUMBING[env]
        return None, ""

    def _unused_binding(self, value: cst.CSTNode) -> cst.BaseSmallStatement | None:
        """The statement binding `value` when nothing will read the name any more: its
        reads are all in code the migration removes or rewrites (set_device, DDP's
        device_ids, rank tests, device moves)."""
        small = self.parent(value)
        if not (isinstance(small, cst.Assign) and small.value is value and len(small.targets) == 1):
            return None
        name = dotted_name(small.targets[0].target)
        if name is None:
            return None
        binding = next((b for b in self.facts.bindings if b.target is small.targets[0].target), None)
        scope = binding.scope if binding is not None and "." not in name else None
        if "." in name and self._handed_whole(name.split(".")[0]):
            return None  # `args.rank = ...`, then `train(args)`: the callee may read it
        return None if [n for n in self.loads_of(name, scope) if not self._going(n)] else small

    def _handed_whole(self, root: str) -> bool:
        """`root` read as itself, not through an attribute (`train(args)`, `vars(args)`)."""
        for load in self.facts.loads:
            if load.name == root and isinstance(load.node, cst.Name):
                up = self.parent(load.node)
                if not (isinstance(up, cst.Attribute) and up.value is load.node):
                    return True
        return False

    def _going(self, node: cst.CSTNode) -> bool:
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(current, (cst.BaseStatement, cst.Module)):
            if id(current) in self.vanishing:
                return True
            current = self.parent(current)
        return False

    def helper_calls(self) -> list[HelperCall]:
        """Statements calling another file's set-up helper or `save_on_master(...)`."""
        out = []
        for c in self.facts.calls:
            helper = self.helpers.get(dotted_name(c.node.func) or "")
            statement = _expr_statement(c.node, self.parent)
            if helper is None or helper[0] not in ("setup", "save_on_master") or statement is None:
                continue
            holder = dotted_name(c.node.args[0].value) if len(c.node.args) == 1 else None
            attributes = tuple(
                (attribute, meaning) for attribute, meaning, elsewhere in helper[1]
                if elsewhere or holder is None or any(not self._going(n) for n in self.loads_of(f"{holder}.{attribute}"))
            )
            out.append(HelperCall(c.node, statement, helper[0], attributes, helper[2]))
        return out

    def wrap_helper_calls(self) -> list[cst.Call]:
        """Calls of another file's helper that hands back the model it is given wrapped
        (`model, device = model_device(n_gpu, model)`), wherever the call stands."""
        return [
            c.node for c in self.facts.calls
            if (self.helpers.get(dotted_name(c.node.func) or "") or ("",))[0] == "wraps_model"
        ]

    def rank_tests(self) -> list[RankTest]:
        """Outermost main-process tests, in document order (read from the node index,
        outer before inner, so a test inside a matched one is skipped)."""
        out: list[RankTest] = []
        matched: set[int] = set()
        kinds = ("Comparison", "BooleanOperation", "UnaryOperation")
        candidates = [n for kind in kinds for n in self.facts.by_type.get(kind, ())]
        for node in sorted(candidates, key=self.facts.order.__getitem__):
            if self._within(node, matched):
                continue
            main = self.main_test(node)
            if main is not None:
                out.append(RankTest(node, main))
                matched.add(id(node))
        return out

    def _within(self, node: cst.CSTNode, matched: set[int]) -> bool:
        current = self.parent(node)
        while current is not None and not isinstance(current, cst.BaseStatement):
            if id(current) in matched:
                return True
            current = self.parent(current)
        return False

    def main_test(self, node: cst.BaseExpression) -> bool | None:
        """True for a main-process test, False for its negation, None otherwise.

        Beyond the lint's rank tests (analysis.branches): `not args.distributed or
        rank == 0` and `args.distributed and rank == 0` are main-process tests (on one
        process the Accelerator's main process is the only one), and so is
        `rank % ngpus_per_node == 0`. Other `and`/`or` are left to their parts."""
        if isinstance(node, cst.BooleanOperation):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                if self.main_test(side) is True and (
                    (isinstance(node.operator, cst.Or) and _single_process_test(other))
                    or (isinstance(node.operator, cst.And) and _distributed_test(other))
                ):
                    return True
            return None
        if isinstance(node, cst.UnaryOperation):
            if not isinstance(node.operator, cst.Not):
                return None
            inner = self.main_test(node.expression)
            return None if inner is None else not inner
        if not isinstance(node, cst.Comparison) or len(node.comparisons) != 1:
            return None
        left, target = node.left, node.comparisons[0]
        if isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Modulo):
            zero = cst.Comparison(left.left, [cst.ComparisonTarget(cst.Equal(), cst.Integer("0"))])
            if self.audience(zero) is not None and _code(target.comparator) == "0":
                if isinstance(target.operator, cst.Equal):
                    return True
                if isinstance(target.operator, cst.NotEqual):
                    return False
            return None
        if any(isinstance(side, cst.Name) and side.value in self.loop_targets for side in (left, target.comparator)):
            return None  # `for rank in range(world_size): if rank == 0:` is not this process's rank
        audience = self.audience(node)
        if audience is None:
            return None
        return audience.name == "MAIN"


_EQ = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))


def sampler_arg_edit(arg: SamplerArg) -> Edit:
    """The DataLoader call without `sampler=` and with the sampler's shuffling
    (`shuffle=(sampler is None)` → `shuffle=True`)."""
    call = arg.loader_call
    shuffle = cst.parse_expression(arg.shuffle)
    args = []
    has_shuffle = False
    for a in call.args:
        if a is arg.arg:
            continue
        if a.keyword is not None and a.keyword.value == "shuffle":
            a = a.with_changes(value=shuffle)
            has_shuffle = True
        args.append(a)
    if not has_shuffle and arg.shuffle != "False":
        last = args[-1]
        after = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else cst.SimpleWhitespace(" ")
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=after))
        args.append(cst.Arg(shuffle, keyword=cst.Name("shuffle"), equal=_EQ))
    final = call.args[-1].comma
    # the last argument's trailing space (`...\n    )` of a multi-line call) stays before `)`
    args[-1] = args[-1].with_changes(
        comma=final if isinstance(final, cst.Comma) else cst.MaybeSentinel.DEFAULT,
        whitespace_after_arg=call.args[-1].whitespace_after_arg,
    )
    return replace(call, call.with_changes(args=args))


def _environ_import(facts: Facts, going: list[cst.CSTNode]) -> tuple[ImportChange, ...]:
    """`import os`, dropped if unused once the launcher's variables are no longer read from
    `os.environ` by hand (LibCST keeps it while anything else uses it)."""
    if facts.imports.aliases.get("os") != "os":
        return ()
    reads = any("os.environ" in _code(node) for node in going)
    return (ImportChange("os", None, None),) if reads else ()


def _flag_name(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Call):
        node = node.func
    return (dotted_name(node) or "").rsplit(".", 1)[-1]


def _distributed_test(node: cst.BaseExpression) -> bool:
    """`args.distributed`, `dist.is_initialized()`, `args.local_rank != -1`."""
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        target = node.comparisons[0]
        return isinstance(target.operator, cst.NotEqual) and _code(target.comparator) == "-1"
    return _flag_name(node) in _DISTRIBUTED_FLAGS | {"is_initialized"}


def _single_process_test(node: cst.BaseExpression) -> bool:
    """`not args.distributed`, `args.local_rank == -1`."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return _distributed_test(node.expression)
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        target = node.comparisons[0]
        return isinstance(target.operator, cst.Equal) and _code(target.comparator) == "-1"
    return False


# What a launch test becomes: the Accelerator's count says whether several processes run.
_LAUNCH_TESTS = {True: "num_processes > 1", False: "num_processes == 1"}
_LAUNCH_ENV = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"}


def launch_test(node: cst.CSTNode, accelerator: bool = False) -> bool | None:
    """True for a test that holds when a launcher started the script (`int(os.environ.get(
    "RANK", -1)) != -1`, `"LOCAL_RANK" in os.environ`, `os.environ.get("RANK") is not
    None`, `args.local_rank != -1`), False for its negation, None for anything else. With `accelerator`, the
    rewritten form (`accelerator.num_processes > 1`) instead."""
    if not isinstance(node, cst.Comparison) or len(node.comparisons) != 1:
        return None
    left, target = node.left, node.comparisons[0]
    op, right = target.operator, _code(target.comparator)
    if accelerator:
        if not (dotted_name(left) or "").endswith("accelerator.num_processes") or right != "1":
            return None
        return {cst.GreaterThan: True, cst.NotEqual: True, cst.Equal: False}.get(type(op))  # type: ignore[arg-type]
    if isinstance(op, (cst.In, cst.NotIn)):
        key = left.evaluated_value if isinstance(left, cst.SimpleString) else None
        if key in _LAUNCH_ENV and (dotted_name(target.comparator) or "").endswith("environ"):
            return isinstance(op, cst.In)
        return None
    if (dotted_name(left) or "").rsplit(".", 1)[-1] == "local_rank" and "." in (dotted_name(left) or ""):
        # `args.local_rank != -1`: the option the older launcher passes (-1 when run plainly);
        # accel-launch passes none, so the test must read the Accelerator
        if right != "-1":
            return None
        return {cst.NotEqual: True, cst.Equal: False}.get(type(op))  # type: ignore[arg-type]
    read = left.args[0].value if isinstance(left, cst.Call) and dotted_name(left.func) == "int" and len(left.args) == 1 else left
    if not (isinstance(read, cst.Call) and (dotted_name(read.func) or "").endswith("environ.get")):
        return None  # `os.environ["RANK"]` fails without a launcher: not a test
    if _env_name(read) not in _LAUNCH_ENV:
        return None
    default = _code(read.args[1].value) if len(read.args) > 1 else "None"
    if right != default or right not in {"-1", '"-1"', "'-1'", "None"}:
        return None
    if isinstance(op, (cst.NotEqual, cst.IsNot)):
        return True
    if isinstance(op, (cst.Equal, cst.Is)):
        return False
    return None


def _env_name(node: cst.BaseExpression) -> str | None:
    """`os.environ["LOCAL_RANK"]` / `os.environ.get("LOCAL_RANK", ...)` → "LOCAL_RANK"."""
    key = None
    if isinstance(node, cst.Subscript) and (dotted_name(node.value) or "").endswith("environ") and node.slice:
        element = node.slice[0].slice
        key = element.value if isinstance(element, cst.Index) else None
    elif isinstance(node, cst.Call) and (dotted_name(node.func) or "").endswith("environ.get") and node.args:
        key = node.args[0].value
    if isinstance(key, cst.SimpleString):
        value = key.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _read_only_by(facts: Facts, call: cst.Call, parent: Parent) -> list[cst.BaseSmallStatement]:
    """`backend = "nccl" if torch.cuda.is_available() else "gloo"` read only by the
    `init_process_group(backend, ...)` that goes: it goes too. Only a name bound once in
    the call's scope, by a value that computes nothing but a choice (constants, names,
    `is_available()` queries)."""
    scope = next((c.scope for c in facts.calls if c.node is call), None)
    out = []
    for arg in call.args:
        if not isinstance(arg.value, cst.Name):
            continue
        name = arg.value.value
        bindings = [b for b in facts.bindings if b.name == name and b.scope is scope]
        if len(bindings) != 1 or bindings[0].element is not None or not _pure(bindings[0].value):
            continue
        small = parent(parent(bindings[0].target))  # type: ignore[arg-type]
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
            continue
        if all(inside_any(load.node, {id(call)}, parent) for load in facts.loads if load.name == name and load.scope is scope):
            out.append(small)
    return out


def _pure(node: cst.CSTNode | None) -> bool:
    if isinstance(node, (cst.SimpleString, cst.Integer, cst.Name, cst.Attribute)):
        return True
    if isinstance(node, cst.IfExp):
        return _pure(node.test) and _pure(node.body) and _pure(node.orelse)
    if isinstance(node, cst.Call):
        return not node.args and (dotted_name(node.func) or "").endswith(".is_available")
    return False


def _emptied_helpers(facts: Facts, removals: dict[int, Fix], parent: Parent) -> dict[int, Fix]:
    """`def ddp_setup(): torch.cuda.set_device(...); init_process_group(...)`: a
    module-level helper whose every statement goes would be left holding `pass`; it goes
    whole instead, with each `ddp_setup()` statement that calls it. Only when every use of
    the name is such a call (nothing reads a result). The Fixes that emptied it become one,
    shared by the statements they removed."""
    removed: dict[int, list[Fix]] = {}
    for fix in {id(f): f for f in removals.values()}.values():
        for edit in fix.edits:
            if edit.replacement is cst.RemovalSentinel.REMOVE:
                removed.setdefault(id(edit.node), []).append(fix)
    out: dict[int, Fix] = {}
    for name, defs in facts.functions.items():
        function = defs[0]
        if len(defs) != 1 or id(function) in facts.method_of or function.decorators:
            continue
        if not isinstance(facts.scope_of_function.get(id(function)), cst.Module):
            continue
        fixes = _emptying_fixes(function, removed)
        calls = _bare_calls(facts, name, parent)
        if not fixes or not calls:
            continue
        inside = lambda node: _within_node(node, function, parent)  # noqa: E731
        kept = [e for f in fixes for e in f.edits if not inside(e.node)]
        edits = [remove(function), *(remove(removal_unit(c, parent, facts.imports)) for c in calls), *kept]
        merged = Fix(tuple(edits), remove_imports=fixes[0].remove_imports)
        for key, fix in removals.items():
            if any(fix is f for f in fixes):
                out[key] = merged
    return out


def _emptying_fixes(function: cst.FunctionDef, removed: dict[int, list[Fix]]) -> list[Fix]:
    """The Fixes that remove every statement of `function`'s body (a leading docstring
    aside), or [] when some statement stays."""
    body = function.body.body if isinstance(function.body, cst.IndentedBlock) else ()
    fixes: list[Fix] = []
    for i, statement in enumerate(body):
        if i == 0 and isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
            small = statement.body[0]
            if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
                continue
        if id(statement) in removed:
            found = removed[id(statement)]
        elif isinstance(statement, cst.SimpleStatementLine) and all(id(s) in removed for s in statement.body):
            found = [f for s in statement.body for f in removed[id(s)]]
        else:
            return []
        fixes.extend(f for f in found if not any(f is g for g in fixes))
    return fixes


def _bare_calls(facts: Facts, name: str, parent: Parent) -> list[cst.BaseSmallStatement]:
    """`name()` statements, when every load of `name` is one; else []."""
    calls = []
    for load in facts.loads:
        if load.name != name:
            continue
        call = parent(load.node)
        statement = _expr_statement(call, parent) if isinstance(call, cst.Call) and call.func is load.node else None
        if statement is None or not all(_plain_arg(a) for a in call.args):  # type: ignore[union-attr]
            return []
        calls.append(statement)
    return calls


def _plain_arg(arg: cst.Arg) -> bool:
    """An argument whose evaluation does nothing (`setup(rank, world_size)`, `setup(args.gpu, 4)`):
    the call can go with the helper."""
    return arg.star == "" and (dotted_name(arg.value) is not None or isinstance(arg.value, (cst.Integer, cst.SimpleString)))


def destroy_helpers(facts: Facts, destroys: list[cst.Call], parent: Parent) -> dict[int, tuple[cst.FunctionDef, list]]:
    """`def cleanup(): dist.destroy_process_group()`: a module-level helper that only leaves
    the group, called as bare `cleanup()` statements. id(the destroy call) → (the helper,
    its calls): each call becomes `accelerator.end_training()` and the helper goes."""
    out = {}
    for call in destroys:
        small = parent(call)
        line = parent(small) if isinstance(small, cst.Expr) else None
        block = parent(line) if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None
        function = parent(block) if isinstance(block, cst.IndentedBlock) and len(block.body) == 1 else None
        if not isinstance(function, cst.FunctionDef) or function.decorators or id(function) in facts.method_of:
            continue
        if not isinstance(facts.scope_of_function.get(id(function)), cst.Module) or facts.params.get(id(function)):
            continue
        if len(facts.functions.get(function.name.value, [])) != 1:
            continue
        calls = _bare_calls(facts, function.name.value, parent)
        if calls and all(not c.value.args for c in calls):  # type: ignore[attr-defined]
            out[id(call)] = (function, calls)
    return out


def _within_node(node: cst.CSTNode, outer: cst.CSTNode, parent: Parent) -> bool:
    return inside_any(node, {id(outer)}, parent)


def local_rank_names(facts: Facts) -> set[str]:
    """Names bound from `int(os.environ["LOCAL_RANK"])`: torchrun scripts use them as the
    device index (`x.to(self.gpu_id)`, `.cuda(local_rank)`), so a move to one is a device
    move like `.to(device)` (a spawned worker's first parameter is one too: spawn.py)."""
    out = set()
    for b in facts.bindings:
        value = b.value
        if b.element is None and isinstance(value, cst.Call) and dotted_name(value.func) == "int" and len(value.args) == 1:
            if _env_name(value.args[0].value) == "LOCAL_RANK":
                out.add(b.name)
    return out


def _rank_device_strings(facts: Facts, parent: Parent) -> list[cst.FormattedString]:
    """`f"cuda:{self.gpu_id}"` (a local-rank name) that only ever reaches `map_location=`:
    the Accelerator's device is that device under a launcher, and the CPU where there is
    no GPU (where the string would fail to load)."""
    ranks = local_rank_names(facts)
    out = []
    for node in facts.by_type.get("FormattedString", ()):
        parts = node.parts  # type: ignore[attr-defined]
        if len(parts) != 2 or not isinstance(parts[0], cst.FormattedStringText) or parts[0].value != "cuda:":
            continue
        if not isinstance(parts[1], cst.FormattedStringExpression) or dotted_name(parts[1].expression) not in ranks:
            continue
        if parts[1].format_spec is not None or parts[1].conversion is not None:
            continue
        if _map_location(node, parent) or _read_only_as_map_location(facts, node, parent):
            out.append(node)  # type: ignore[arg-type]
    return out


def _map_location(node: cst.CSTNode, parent: Parent) -> bool:
    arg = parent(node)
    return isinstance(arg, cst.Arg) and arg.keyword is not None and arg.keyword.value == "map_location"


def _read_only_as_map_location(facts: Facts, node: cst.CSTNode, parent: Parent) -> bool:
    """`loc = f"cuda:{...}"` whose every read in its function is `map_location=loc`."""
    small = parent(node)
    if not (isinstance(small, cst.Assign) and small.value is node and len(small.targets) == 1):
        return False
    target = small.targets[0].target
    if not isinstance(target, cst.Name):
        return False
    binding = next((b for b in facts.bindings if b.target is target), None)
    if binding is None or sum(b.name == target.value and b.scope is binding.scope for b in facts.bindings) != 1:
        return False
    loads = [load for load in facts.loads if load.name == target.value and load.scope is binding.scope]
    return bool(loads) and all(_map_location(load.node, parent) for load in loads)


def distribution_facts(
    module: cst.Module, facts: Facts, roles: RoleTable, parent: Parent, rank_audience, vanishing: frozenset[int] = frozenset(),
    helpers: Mapping[str, list] | None = None,
) -> DistributionFacts:
    """Everything hand-made distribution in one module. `vanishing` holds ids of nodes
    other steps remove (device moves prepare() makes redundant); `helpers` are the calls
    of other files' distribution helpers (project/dist_helpers.py)."""
    b = _Builder(module, facts, roles, parent, rank_audience, helpers)
    b.vanishing |= vanishing
    wraps = b.wraps()
    wrapped = {dotted_name(w.inner) for w in wraps} | {
        dotted_name(w.statement.targets[0].target) for w in wraps if isinstance(w.statement, cst.Assign)
    }
    samplers, inline = b.samplers()
    orphans = b.orphan_set_epochs(samplers, inline)
    inits = b.calls(INIT)
    set_devices = b.calls(SET_DEVICE)
    for call in [*inits, *set_devices]:
        statement = _expr_statement(call, parent)
        if statement is not None:
            b.boilerplate.append(statement)
            extra = _read_only_by(facts, call, parent)
            if extra:
                b.boilerplate.extend(extra)
                b.together.append([statement, *extra])
    rank_tests = b.rank_tests()
    # a wrap replaced by the module it receives keeps that module's expression (and the
    # names it reads: `DDP(model.to(gpu), device_ids=[gpu])` → `model.to(gpu)`)
    kept = {id(w.inner) for w in wraps if w.statement is None}
    b.vanishing |= {id(t.node) for t in rank_tests} | {id(s) for s in b.boilerplate} | {
        id(arg) for w in wraps for arg in w.call.args if id(arg.value) not in kept
    } | {id(w.call) for w in wraps if w.statement is not None}
    device_strings = _rank_device_strings(facts, parent)
    b.vanishing |= {id(d) for d in device_strings}
    spawns = find_spawns(facts, parent)
    launched = launched_workers(facts)
    converting = [s for s in spawns if s.reason is None]
    env_lines = master_env_lines(facts, parent) if converting or launched else []
    if env_lines:  # the launcher picks the rendezvous address and port
        b.boilerplate.extend(env_lines)
        b.vanishing |= {id(e) for e in env_lines}
    # the calls of a set-up helper that goes whole (`setup(rank, world_size)`) go with it:
    # what they read is not read any more
    early = shared_removals(b.boilerplate, parent, facts.imports, (), b.companions, b.together)
    for fix in _emptied_helpers(facts, early, parent).values():
        for e in fix.edits:
            if e.replacement is cst.RemovalSentinel.REMOVE:
                b.vanishing.add(id(e.node))
                if isinstance(e.node, cst.SimpleStatementLine):
                    b.vanishing |= {id(small) for small in e.node.body}
    workers = [(s.worker, s.world) for s in converting if s.world] + [(w.worker, w.world) for w in launched if w.world]
    given = {id(a.value) for w in launched for a in w.call.args}
    plumbing = b.plumbing(workers, given)
    helper_calls = b.helper_calls()
    cleanup = tuple(
        change
        for local, qualified in sorted(facts.imports.aliases.items())
        if qualified.startswith(_CLEANED_MODULES)
        for change in import_removals(facts.imports, local)
    ) + _environ_import(facts, [p.node for p in plumbing] + list(b.boilerplate))
    destroys = b.calls(DESTROY)
    handled = {INIT, DESTROY, ALL_REDUCE, *BARRIERS, *PLUMBING}
    raw = [
        c.node for c in facts.calls
        if (c.qualified or "").startswith("torch.distributed.")
        and c.qualified not in handled
        and (c.qualified or "").rsplit(".", 1)[-1] not in _QUERIES
    ]
    removals = shared_removals(b.boilerplate, parent, facts.imports, cleanup, b.companions, b.together)
    removals.update(_emptied_helpers(facts, removals, parent))
    removed = {id(e.node) for fix in removals.values() for e in fix.edits if e.replacement is cst.RemovalSentinel.REMOVE}
    going = lambda node: b._going(node) or inside_any(node, removed, parent)  # noqa: E731
    spawns = [judge_worker_reads(s, facts, parent, going) if s.reason is None else s for s in spawns]
    return DistributionFacts(
        wraps=tuple(wraps),
        module_accesses=tuple(b.module_accesses({w for w in wrapped if w})),
        samplers=tuple(samplers),
        inline_samplers=tuple(inline),
        orphan_set_epochs=tuple(orphans),
        inits=tuple(inits),
        set_devices=tuple(set_devices),
        destroys=tuple(destroys),
        destroy_helpers=destroy_helpers(facts, destroys, parent),
        barriers=tuple(b.calls(BARRIERS)),
        all_reduces=tuple(b.all_reduces()),
        helper_calls=tuple(helper_calls),
        wrap_helper_calls=tuple(b.wrap_helper_calls()),
        plumbing=tuple(plumbing),
        device_strings=tuple(device_strings),
        rank_tests=tuple(rank_tests),
        spawns=tuple(spawns),
        launched=tuple(launched),
        master_env=tuple(env_lines) if launched or any(s.reason is None for s in spawns) else (),
        raw_calls=tuple(raw),
        removals=removals,
        import_cleanup=cleanup,
    )
