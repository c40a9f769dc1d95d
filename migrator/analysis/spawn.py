"""Workers a script starts itself (`mp.spawn(worker, nprocs=N, args=(...))`), and the
same workers once the launcher starts the script: what a conversion needs to know.

A spawn converts when it is the whole way the script runs distributed: one statement,
a worker defined once at module level in this file and called nowhere else, a literal
`args=` tuple, and a worker that joins a process group (directly or through a helper of
this file). Anything else is described with the reason it stays. Nothing here edits the
tree; the worker's parameter reads that survive the migration are judged by
distributed.py, which knows what the migration removes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import libcst as cst

from migrator.analysis.collect import Facts
from migrator.analysis.names import call_argument as _keyword, code_of as _code, dotted_name

Parent = Callable[[cst.CSTNode], "cst.CSTNode | None"]

SPAWN = "torch.multiprocessing.spawn"
OTHER_STARTS = {"torch.multiprocessing.start_processes", "torch.multiprocessing.spawn.spawn"}
INIT = "torch.distributed.init_process_group"
# What the launcher sets for every process it starts: the spawn's worker gets its index
# from LOCAL_RANK (the worker's first parameter is this machine's process index, the
# GPU it drives), and the count it was given from WORLD_SIZE.
LOCAL_RANK_ARG = 'int(os.environ.get("LOCAL_RANK", 0))'
WORLD_SIZE_ARG = 'int(os.environ.get("WORLD_SIZE", 1))'
# `nprocs=args.gpus` counted the processes of this machine: the launcher's LOCAL_WORLD_SIZE.
LOCAL_WORLD_SIZE_ARG = 'int(os.environ.get("LOCAL_WORLD_SIZE", 1))'
_MASTER_ENV = {"MASTER_ADDR", "MASTER_PORT"}


@dataclass(frozen=True, eq=False)
class Spawn:
    """`mp.spawn(worker, nprocs=N, args=(a, b))` as a statement.

    `rank` is the worker's first parameter (the spawned process's index), `world` the
    parameter that receives N when N is also passed in `args` (the number of processes).
    `reason` says why the spawn stays as written (None: it converts). `unused` holds the
    statement binding N when the spawn is the only thing that reads it."""

    call: cst.Call
    worker_name: str
    worker: cst.FunctionDef | None
    args: tuple[cst.BaseExpression, ...]
    nprocs: cst.BaseExpression | None
    rank: str | None
    world: str | None
    reason: str | None
    unused: cst.BaseSmallStatement | None = None


@dataclass(frozen=True, eq=False)
class LaunchedWorker:
    """A worker called with the launcher's LOCAL_RANK (a converted spawn): its first
    parameter is this process's local index, and the one given WORLD_SIZE the count."""

    call: cst.Call
    worker: cst.FunctionDef
    rank: str | None
    world: str | None


def _positional_params(worker: cst.FunctionDef) -> list[cst.Param] | None:
    """The worker's parameters a call fills by position; None with `*args`/`**kwargs`."""
    params = worker.params
    if isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None:
        return None
    return [*params.posonly_params, *params.params]


def _module_function(facts: Facts, name: str) -> cst.FunctionDef | None:
    defs = facts.functions.get(name, [])
    if len(defs) != 1 or id(defs[0]) in facts.method_of:
        return None
    return defs[0] if isinstance(facts.scope_of_function.get(id(defs[0])), cst.Module) else None


def _calls_within(facts: Facts, function: cst.FunctionDef) -> list:
    return [c for c in facts.calls if c.scope is function]


def joins_group(facts: Facts, worker: cst.FunctionDef) -> bool:
    """The worker calls init_process_group itself, or through a module function of this
    file it calls (`setup(rank, world_size)`)."""
    for c in _calls_within(facts, worker):
        if (c.qualified or "") == INIT:
            return True
        helper = _module_function(facts, c.func or "") if c.func and "." not in c.func else None
        if helper is not None and any((h.qualified or "") == INIT for h in _calls_within(facts, helper)):
            return True
    return False


def _other_calls(facts: Facts, name: str, call: cst.Call, parent: Parent) -> list[cst.CSTNode]:
    """Reads of the worker's name other than the spawn's first argument."""
    first = call.args[0].value
    return [load.node for load in facts.loads if load.name == name and load.node is not first]


def _unused_nprocs(facts: Facts, call: cst.Call, nprocs: cst.BaseExpression | None, scope, parent: Parent):
    """`world_size = torch.cuda.device_count()` read only by the spawn: it goes with it."""
    if not isinstance(nprocs, cst.Name):
        return None
    bindings = [b for b in facts.bindings if b.name == nprocs.value and b.scope is scope]
    if len(bindings) != 1 or bindings[0].element is not None:
        return None
    small = parent(parent(bindings[0].target))  # type: ignore[arg-type]
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and small.targets[0].target is bindings[0].target):
        return None
    for load in facts.loads:
        if load.name == nprocs.value and load.scope is scope and not inside_any(load.node, {id(call)}, parent):
            return None
    return small


def inside_any(node: cst.CSTNode, outer: set[int], parent: Parent) -> bool:
    """`node`, or a node above it, is one of the ids in `outer`."""
    current: cst.CSTNode | None = node
    while current is not None:
        if id(current) in outer:
            return True
        current = parent(current)
    return False


def find_spawns(facts: Facts, parent: Parent) -> list[Spawn]:
    """Every process-starting call of torch.multiprocessing, with what converting it needs."""
    out = []
    shares_memory = any((c.func or "").endswith(".share_memory") for c in facts.calls)
    for c in facts.calls:
        qualified = c.qualified or ""
        if qualified != SPAWN and qualified not in OTHER_STARTS:
            continue
        out.append(_spawn(facts, c, parent, shares_memory))
    return out


def _spawn(facts: Facts, c, parent: Parent, shares_memory: bool) -> Spawn:
    call = c.node
    fn = _keyword(call, "fn", 0)
    name = dotted_name(fn.value) if fn is not None else None
    worker = _module_function(facts, name) if name and "." not in name else None
    given = _keyword(call, "args", 1)
    nprocs_arg = _keyword(call, "nprocs", 2)
    nprocs = nprocs_arg.value if nprocs_arg is not None else None
    args: tuple[cst.BaseExpression, ...] = ()
    if given is not None and isinstance(given.value, cst.Tuple):
        args = tuple(el.value for el in given.value.elements if isinstance(el, cst.Element))
    reason = None
    statement = parent(call)
    if (c.qualified or "") != SPAWN:
        reason = f"`{_code(call.func)}` is not `torch.multiprocessing.spawn`"
    elif not (isinstance(statement, cst.Expr) and statement.value is call):
        reason = "its result is used (the processes' context)"
    elif worker is None:
        reason = f"the worker `{name or _code(fn.value) if fn else '?'}` is not a function defined once at module level in this file"
    elif given is not None and (not isinstance(given.value, cst.Tuple) or len(args) != len(given.value.elements)):
        reason = f"`args={_code(given.value)}` is not a tuple written out"
    elif any(_options_kept(call)):
        reason = next(_options_kept(call))
    elif shares_memory:
        reason = "the workers share a model's memory (`share_memory()`, Hogwild training): they are not one process per device"
    elif not joins_group(facts, worker):
        reason = f"`{name}` never joins a process group: the processes are not one distributed run"
    elif _other_calls(facts, name, call, parent):
        other = _other_calls(facts, name, call, parent)[0]
        use = parent(other)
        shown = _code(use if isinstance(use, cst.Call) and use.func is other else other)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        reason = f"`{name}` also runs without the spawn (`{shown}`): the script is both a spawning and a single-process one"
    if reason is None:
        reason = _after_the_workers(facts, statement, parent)
    rank = world = None
    params = _positional_params(worker) if worker is not None else None
    if reason is None and (params is None or len(params) < len(args) + 1 or any(p.default is None for p in params[len(args) + 1 :])):
        reason = f"`{name}`'s parameters do not match the index and the {len(args)} argument(s) the spawn passes"
    if reason is None and params is not None:
        rank = params[0].name.value
        if nprocs is not None:
            shown = _code(nprocs)
            world = next((p.name.value for p, a in zip(params[1:], args) if _code(a) == shown), None)
    unused = _unused_nprocs(facts, call, nprocs, c.scope, parent) if reason is None else None
    return Spawn(call, name or "the worker", worker, args, nprocs, rank, world, reason, unused)


def _after_the_workers(facts: Facts, statement: cst.CSTNode, parent: Parent, depth: int = 0) -> str | None:
    """Why the spawn is not the last thing the script does, or None. Code that runs after
    the spawn (an evaluation, a summary) ran once, in the parent, when the workers were
    done; with the spawn turned into a call it would run on every launched process. A
    spawn in a loop would start its workers several times."""
    current: cst.CSTNode | None = parent(statement)  # the statement line
    while current is not None and not isinstance(current, cst.Module):
        up = parent(current)
        body = getattr(up, "body", None)
        if isinstance(up, (cst.IndentedBlock, cst.Module)) and isinstance(body, (list, tuple)):
            after = list(body)[list(body).index(current) + 1 :]
            if any(not _inert(s) for s in after):
                shown = _code(next(s for s in after if not _inert(s))).splitlines()[0]
                return f"`{shown}` runs after the workers, once; called directly it would run on every process"
        if isinstance(up, (cst.For, cst.While)):
            return "the spawn runs in a loop (several rounds of workers)"
        if isinstance(up, cst.FunctionDef):
            return _after_the_calls(facts, up, parent, depth)
        current = up
    return None


def _after_the_calls(facts: Facts, function: cst.FunctionDef, parent: Parent, depth: int) -> str | None:
    """The same question for each call of the function that holds the spawn (`main()`)."""
    if depth >= 2 or _module_function(facts, function.name.value) is not function:
        return f"`{function.name.value}` holds the spawn and is not a module-level function called once"
    calls = [load.node for load in facts.loads if load.name == function.name.value]
    for node in calls:
        call = parent(node)
        small = parent(call) if isinstance(call, cst.Call) and call.func is node else None
        if not isinstance(small, cst.Expr):
            return f"`{function.name.value}`, which holds the spawn, is used as a value"
        why = _after_the_workers(facts, small, parent, depth + 1)
        if why:
            return why
    return None


def _inert(statement: cst.CSTNode) -> bool:
    """`pass` and string statements: nothing runs."""
    if isinstance(statement, cst.SimpleStatementLine):
        return all(
            isinstance(s, cst.Pass) or (isinstance(s, cst.Expr) and isinstance(s.value, (cst.SimpleString, cst.ConcatenatedString)))
            for s in statement.body
        )
    return False


def _options_kept(call: cst.Call):
    """Spawn options a direct call cannot keep: `join=False` (the caller goes on while the
    workers run), `daemon=True`, another start method."""
    join = _keyword(call, "join", 3)
    if join is not None and _code(join.value) != "True":
        yield f"`join={_code(join.value)}`: the caller goes on while the workers run"
    daemon = _keyword(call, "daemon", 4)
    if daemon is not None and _code(daemon.value) != "False":
        yield f"`daemon={_code(daemon.value)}`"
    method = _keyword(call, "start_method", 5)
    if method is not None and _code(method.value) not in {'"spawn"', "'spawn'"}:
        yield f"`start_method={_code(method.value)}`"


def launched_workers(facts: Facts) -> list[LaunchedWorker]:
    """`worker(int(os.environ.get("LOCAL_RANK", 0)), ...)`: a spawn converted earlier."""
    out = []
    for c in facts.calls:
        if not c.func or "." in c.func or not c.node.args or _code(c.node.args[0].value) != LOCAL_RANK_ARG:
            continue
        worker = _module_function(facts, c.func)
        params = _positional_params(worker) if worker is not None else None
        if not params:
            continue
        world = next(
            (p.name.value for p, a in zip(params[1:], c.node.args[1:]) if a.keyword is None and _code(a.value) == WORLD_SIZE_ARG),
            None,
        )
        out.append(LaunchedWorker(c.node, worker, params[0].name.value, world))
    return out


def worker_rank_names(facts: Facts, parent: Parent) -> set[str]:
    """The first parameter of every worker (spawned or launched): its local process index,
    used as the GPU index (`model.to(rank)`, `.cuda(gpu)`), and the names it reaches in
    this file's own classes and functions (`Trainer(..., rank)` → `self.gpu_id`)."""
    starts = [(s.worker, s.rank) for s in find_spawns(facts, parent) if s.rank]
    starts += [(w.worker, w.rank) for w in launched_workers(facts) if w.rank]
    return {name for worker, rank in starts for _, name in index_holders(facts, worker, rank, parent)}


def index_holders(facts: Facts, worker, rank: str, parent: Parent) -> list[tuple[cst.FunctionDef, str]]:
    """(function, name) for every place the worker's index is followed to: the worker's
    parameter; the parameter of a function or class (`__init__`) of this file it is passed
    to by position or keyword; `self.<attr>` a method stores it in (read in every method
    of the class). A few levels deep, each place once."""
    out: list[tuple[cst.FunctionDef, str]] = []
    todo = [(worker, rank, 0)]
    while todo:
        function, name, depth = todo.pop()
        if (function, name) in out:
            continue
        out.append((function, name))
        if depth >= 3 or "." in name:
            continue
        for load in facts.loads:
            if load.scope is function and load.name == name:
                todo.extend((f, n, depth + 1) for f, n in _passed_to(facts, load.node, function, parent))
    return out


def _passed_to(facts: Facts, node: cst.CSTNode, function, parent: Parent) -> list[tuple[cst.FunctionDef, str]]:
    """Where one read of the index hands it on: a parameter of a callee of this file, or
    `self.<attr>` in a method."""
    up = parent(node)
    if isinstance(up, cst.Arg) and isinstance(parent(up), cst.Call) and up.star == "":
        call = parent(up)
        callee, params = _own_callee(facts, call.func)  # type: ignore[union-attr]
        if callee is None:
            return []
        if up.keyword is not None:
            return [(callee, up.keyword.value)] if up.keyword.value in params else []
        index = list(call.args).index(up)  # type: ignore[union-attr]
        return [(callee, params[index])] if index < len(params) else []
    if isinstance(up, cst.Assign) and len(up.targets) == 1 and id(function) in facts.method_of:
        target = dotted_name(up.targets[0].target)
        first = facts.params.get(id(function), ())
        if target and first and target.startswith(first[0] + ".") and target.count(".") == 1:
            return [(function, "self." + target.split(".", 1)[1])]
    while isinstance(up, cst.BinaryOperation):  # `rank = args.node * args.gpus + gpu`
        up = parent(up)
    if isinstance(up, cst.Assign) and len(up.targets) == 1 and isinstance(up.targets[0].target, cst.Name):
        return [(function, up.targets[0].target.value)]
    return []


def _own_callee(facts: Facts, func: cst.BaseExpression) -> tuple[cst.FunctionDef | None, tuple[str, ...]]:
    """A module function of this file, or a class of it (its `__init__`, less `self`)."""
    name = dotted_name(func)
    if not name or "." in name:
        return None, ()
    function = _module_function(facts, name)
    if function is not None:
        return function, facts.params.get(id(function), ())
    cls = facts.classes.get(name)
    init = next((f for f in facts.functions.get("__init__", []) if facts.method_of.get(id(f)) is cls), None)
    if cls is None or init is None:
        return None, ()
    return init, facts.params.get(id(init), ())[1:]


def master_env_lines(facts: Facts, parent: Parent) -> list[cst.BaseSmallStatement]:
    """`os.environ["MASTER_ADDR"] = ...` / `os.environ["MASTER_PORT"] = ...`: the address
    and port picked by hand for the workers' rendezvous (the launcher sets its own)."""
    out = []
    for node in facts.by_type.get("Assign", ()):
        if len(node.targets) != 1:  # type: ignore[attr-defined]
            continue
        target = node.targets[0].target  # type: ignore[attr-defined]
        if not (isinstance(target, cst.Subscript) and (dotted_name(target.value) or "").endswith("environ")):
            continue
        element = target.slice[0].slice if len(target.slice) == 1 else None
        key = element.value if isinstance(element, cst.Index) else None
        if isinstance(key, cst.SimpleString) and key.evaluated_value in _MASTER_ENV:
            out.append(node)  # type: ignore[arg-type]
    return out


# Calls that only print, format or seed with the worker's index: the index they get from
# LOCAL_RANK is the one the spawn gave. Anything else the index reaches is not followed.
_FOLLOWED_CALLS = {
    "print", "str", "int", "float", "repr", "format", "torch.device", "torch.manual_seed",
    "torch.cuda.manual_seed", "random.seed", "np.random.seed", "numpy.random.seed",
}
_FOLLOWED_METHODS = {"to", "cuda", "format"}


def judge_worker_reads(spawn: Spawn, facts: Facts, parent: Parent, going: Callable[[cst.CSTNode], bool]) -> Spawn:
    """The spawn with a `reason` when the worker's index or count is used where the
    converted script could not keep its meaning: stored on an object the migration does
    not follow (`args.gpu = gpu`), or passed on to a function of the user's."""
    from dataclasses import replace

    worker = spawn.worker
    holders = index_holders(facts, worker, spawn.rank, parent)  # type: ignore[arg-type]
    followed = set(holders)
    for function, name in holders:
        for node in _reads(facts, function, name, parent):
            if going(node):
                continue
            if any(place in followed for place in _passed_to(facts, node, function, parent)):
                continue
            why = _unfollowed(node, name, parent)  # type: ignore[arg-type]
            if why:
                return replace(spawn, reason=why)
    if spawn.world:
        for c in _calls_within(facts, worker):  # type: ignore[arg-type]
            size = _keyword(c.node, "world_size", 3) if (c.qualified or "") == INIT else None
            if size is not None and _code(size.value) != spawn.world:
                return replace(spawn, reason=(
                    f"the workers join a run of `{_code(size.value)}` processes, not the `{spawn.world}` this "
                    "machine starts (several machines): the launcher's counts would change its meaning"
                ))
    return spawn


def _reads(facts: Facts, function, name: str, parent: Parent) -> list[cst.CSTNode]:
    """Reads of `name` in `function`; for `self.<attr>`, in every method of its class."""
    if "." not in name:
        return [load.node for load in facts.loads if load.scope is function and load.name == name]
    cls = facts.method_of.get(id(function))
    head, attr = name.split(".", 1)
    out = []
    for load in facts.loads:
        if load.name != head or facts.method_of.get(id(load.scope)) is not cls:
            continue
        up = parent(load.node)
        if isinstance(up, cst.Attribute) and up.value is load.node and up.attr.value == attr:
            targets = parent(up)
            if not (isinstance(targets, cst.AssignTarget) and targets.target is up):
                out.append(up)
    return out


def _unfollowed(node: cst.CSTNode, rank: str, parent: Parent) -> str | None:
    current: cst.CSTNode | None = node
    while current is not None and not isinstance(current, (cst.BaseStatement, cst.BaseSmallStatement)):
        up = parent(current)
        if isinstance(up, (cst.SubscriptElement, cst.Slice)):
            statement = current
            while statement is not None and not isinstance(statement, (cst.BaseStatement, cst.BaseSmallStatement)):
                statement = parent(statement)
            shown = _code(statement) if statement is not None else rank
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            return (
                f"the worker's `{rank}` picks its share by hand (`{shown}`): the prepared loader shards "
                "the data itself, so each process would get a share of a share"
            )
        if isinstance(up, cst.Arg) and isinstance(parent(up), cst.Call):
            call = parent(up)
            callee = dotted_name(call.func) or ""  # type: ignore[union-attr]
            method = call.func.attr.value if isinstance(call.func, cst.Attribute) else None  # type: ignore[union-attr]
            if callee in _FOLLOWED_CALLS or method in _FOLLOWED_METHODS:
                return None
            return f"the worker's `{rank}` is passed on to `{callee or _code(call.func)}(...)`, which the migration does not follow"  # type: ignore[union-attr]
        current = up
    stored = isinstance(current, cst.Assign) and any(not isinstance(t.target, cst.Name) for t in current.targets)
    if stored or (isinstance(current, cst.AugAssign) and not isinstance(current.target, cst.Name)):
        return f"`{_code(current)}` keeps the worker's index where the migration does not follow it"
    return None
