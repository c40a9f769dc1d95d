"""A migrated script has one distributed engine: the Accelerator's.

A script already distributed by another engine (Horovod, DeepSpeed, apex, FSDP,
fairscale) is left whole: converting it would run two engines. And when the migration
creates an Accelerator, nothing of the hand-made distribution may keep running beside
it: a DDP or DataParallel wrap, a DistributedSampler (the data sharded twice), a
process group of its own, collectives called by hand (gradients or metrics reduced twice,
or collectives the other processes never join).
"""

from __future__ import annotations

import ast
import re
from typing import Iterator

from migrator.verify.ddp_options import ddp_options_dropped
from migrator.verify.pair import Pair, Problem
from migrator.verify.program import Program, call_name, dotted, last

CODE = "AM955"
# how the refusal of a script distributed by another engine begins: the engine reports
# that refusal alone (migrator/engine.py)
OTHER_ENGINE = "left as written: the script already distributes with"
_ENGINES = {
    "horovod": "Horovod", "deepspeed": "DeepSpeed", "apex": "NVIDIA apex", "fairscale": "fairscale",
    "colossalai": "ColossalAI", "megatron": "Megatron", "torch.distributed.fsdp": "FSDP",
    "torch.distributed.tensor": "tensor parallelism", "mpi4py": "MPI",
}
# (`convert_sync_batchnorm` is not one: SyncBatchNorm works under the DDP wrap prepare()
# makes, and the Accelerator does not convert BatchNorm itself, so it stays.)
_WRAPS = {"DistributedDataParallel", "DataParallel", "data_parallel", "DistributedSampler", "init_process_group",
          "FullyShardedDataParallel", "fully_shard"}
# A project's own set-up helper (`utils.init_distributed_mode(args)`). Not `setup_for_distributed`:
# it only silences print on the other processes, and works beside the Accelerator.
_SETUP_HELPER = re.compile(r"^(init|setup)_?(dist|distributed|ddp)(_mode)?$")
_COLLECTIVES = ("all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter", "broadcast", "all_to_all")


def check(pair: Pair) -> list[Problem]:
    if not _creates_accelerator(pair):
        return []
    return (
        list(_other_engine(pair)) + list(_left_running(pair)) + list(_prepared_twice(pair))
        + list(ddp_options_dropped(pair)) + list(_data_parallel_replaced(pair)) + list(_launch_test_in_part(pair))
        + list(_group_lost(pair)) + list(_sharded_loaders_prepared(pair))
    )


def _sharded_loaders_prepared(pair: Pair) -> Iterator[Problem]:
    """`train_loader, val_loader = build_loader(cfg)` of another file that shards them with a
    DistributedSampler, then prepared: sharded twice (AM212 names the call)."""
    for a in pair.after.assigns:
        value = a.value
        if isinstance(value, ast.Call) and call_name(value) in pair.sharded_loaders and pair.after.is_prepared(a.target):
            yield pair.at_after(
                CODE, value,
                f"left as written: the loaders `{call_name(value)}(...)` hands back are sharded by a DistributedSampler "
                "in another file, and prepare() would shard them again (AM212 says what to do)",
            )
            return


# torch.distributed calls that need a process group to exist.
_NEEDS_GROUP = {"get_rank", "get_world_size", "barrier", "all_reduce", "all_gather", "broadcast", "reduce", "gather",
                "scatter", "new_group", "all_gather_object", "broadcast_object_list"}


def _group_lost(pair: Pair) -> Iterator[Problem]:
    """`init_process_group(...)` went, but a `dist.get_rank()` (or a collective) stays at
    module level where no Accelerator exists yet to have joined the group: it fails with
    "Default process group has not been initialized", on one process too. (In a function,
    when it runs cannot be told from here: a collective in a model's forward runs after the
    set-up.)"""
    if not any(last(call_name(c)) == "init_process_group" for c in pair.before.calls):
        return
    after = pair.after
    if any(last(call_name(c)) == "init_process_group" for c in after.calls):
        return
    for call in after.calls:
        callee = call_name(call)
        if last(callee) not in _NEEDS_GROUP or not callee.startswith(("dist.", "torch.distributed.")) or _guarded(after, call):
            continue
        scope = after.scope_of.get(call, after.tree)
        if isinstance(scope, ast.Module) and not _accelerator_above(after, call):
            yield pair.at_after(
                CODE, call,
                f"left as written: `{callee}()` needs the process group the removed `init_process_group(...)` "
                "joined, and no Accelerator has joined it where this runs; read it from the Accelerator "
                "(create it first), then migrate",
            )
            return


_INDICES = {"process_index", "local_process_index", "num_processes"}


def _launch_test_in_part(pair: Pair) -> Iterator[Problem]:
    """`accelerator.process_index != -1`: a test of whether a launcher started the script
    (`int(os.environ.get("RANK", -1)) != -1`) of which only the env read was rewritten.
    The Accelerator's index is never -1, so the test holds everywhere and the single-process
    branch it chose is gone: half a conversion."""
    for node in pair.after.nodes:
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
            continue
        left, right = node.left, node.comparators[0]
        if isinstance(left, ast.Attribute) and left.attr in _INDICES and "accelerator" in (dotted(left.value) or ""):
            if isinstance(right, ast.UnaryOp) and isinstance(right.op, ast.USub) and ast.unparse(right) == "-1":
                yield pair.at_after(
                    CODE, node,
                    f"left as written: `{ast.unparse(node)}` compares the Accelerator's {left.attr} with -1, "
                    "which it never is: a test of whether a launcher started the script was rewritten in "
                    "part; test `accelerator.num_processes > 1` instead",
                )


def _data_parallel_replaced(pair: Pair) -> Iterator[Problem]:
    """A functional `data_parallel(...)` the migration replaced by the plain call (AM919's
    fix): what spread the batch over one process's GPUs (`--ngpu`) now spreads nothing."""
    kept = {pair.original_line(c.lineno) for c in pair.after.calls if last(call_name(c)) == "data_parallel"}
    for call in pair.before.calls:
        if last(call_name(call)) == "data_parallel" and call.lineno not in kept:
            yield Problem(
                "AM919", call.lineno, call.col_offset + 1,
                "`data_parallel(...)` became the plain call on this process's device, so the GPU count "
                "it was given no longer spreads the batch: start one process per GPU with "
                "`accel-launch --nproc-per-node N` (each takes a whole batch)",
                blocking=False,
            )


def _creates_accelerator(pair: Pair) -> bool:
    made = lambda program: sum(last(call_name(c)) == "Accelerator" for c in program.calls)  # noqa: E731
    return made(pair.after) > made(pair.before) or len(pair.after.prepares) > len(pair.before.prepares)


# Parts of apex that distribute nothing: fused kernels work under the DDP wrap prepare()
# makes. Its amp is mixed precision by hand, which cannot follow prepare() (below).
_APEX_LOCAL = ("apex.optimizers", "apex.normalization", "apex.contrib", "apex.fused_dense", "apex.mlp")
_APEX_AMP = (
    "left as written: the script scales its loss with NVIDIA apex.amp (`{name}`) in a way the "
    "migration cannot convert (AM405 says where); `amp.initialize` must see the model before any DDP "
    "wrap, so it cannot stay after prepare(): convert it by hand (`Accelerator(mixed_precision=\"fp16\")` "
    "for O1/O2, `accelerator.backward(loss)` for `amp.scale_loss(...)`) or keep it as it is"
)


def _other_engine(pair: Pair) -> Iterator[Problem]:
    for node in pair.before.nodes:
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] if node.module != "apex" else [f"apex.{a.name}" for a in node.names]
        for name in names:
            if name.startswith(_APEX_LOCAL):
                continue
            if name == "apex.amp" or name.startswith("apex.amp."):
                if _imports_apex_amp(pair.after):  # AM405 converts it whole, or not at all
                    yield Pair.at_before(CODE, node, _APEX_AMP.format(name=name))
                return
            engine = next((e for prefix, e in _ENGINES.items() if name == prefix or name.startswith(prefix + ".")), None)
            if engine == "NVIDIA apex" and not _apex_distributes(pair.before):
                continue  # its fused optimizers, its SyncBatchNorm: they work under the Accelerator's DDP
            if engine:
                yield Pair.at_before(
                    CODE, node,
                    f"{OTHER_ENGINE} {engine} (`{name}`); "
                    "adding the Accelerator would run two engines (gradients reduced twice, two "
                    "process groups); convert it by hand or keep it as it is",
                )
                return


def _apex_distributes(program: Program) -> bool:
    """apex wraps the model itself (`apex.parallel.DistributedDataParallel`, `DDP` imported from
    `apex.parallel`). SupContrast imports apex for `convert_syncbn_model` and FusedAdam only."""
    for node in program.nodes:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("apex.parallel"):
            if any(a.name in ("DistributedDataParallel", "DDP") for a in node.names):
                return True
        if isinstance(node, ast.Attribute) and node.attr in ("DistributedDataParallel", "DDP"):
            if (dotted(node.value) or "").startswith("apex"):
                return True
    return False


def _imports_apex_amp(program: Program) -> bool:
    """apex.amp imported and used (`amp.initialize`, `amp.scale_loss`): SupContrast imports it
    beside its fused optimizers and never calls it."""
    used = any(
        isinstance(n, ast.Attribute) and (dotted(n) or "").startswith(("amp.", "apex.amp.")) for n in program.nodes
    )
    if not used:
        return False
    for node in program.nodes:
        if isinstance(node, ast.Import) and any(a.name.startswith("apex.amp") for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.startswith("apex.amp") or (node.module == "apex" and any(a.name == "amp" for a in node.names)):
                return True
    return False


def _left_running(pair: Pair) -> Iterator[Problem]:
    after = pair.after
    for call in after.calls:
        callee = call_name(call)
        name = last(callee)
        if name in _WRAPS and _inside_forward(after, call):
            yield Problem(
                "AM919", *_place(pair, call),
                f"the model's forward calls `{callee}(...)` itself; on N processes each process would "
                "spread its batch over GPUs the other processes own: run it on one device per process "
                "(e.g. `--ngpu 1`)",
                blocking=False,
            )
            continue
        if callee in pair.wrapped_models:
            yield pair.at_after(
                CODE, call,
                f"left as written: `{callee}(...)` hands back a model another file of the run wraps in DataParallel "
                "(AM210 there asks for that wrap to go); prepared as it comes, each process would run a DataParallel "
                "inside the DDP wrap: remove that wrap, then migrate",
            )
            continue
        if callee in pair.model_wrappers:
            yield pair.at_after(
                CODE, call,
                f"left as written: `{callee}(...)` is another file's helper that wraps the model it is handed in "
                "DataParallel or DDP; beside prepare()'s wrap it would nest two wrappers (AM219 says what to do)",
            )
            continue
        if _SETUP_HELPER.search(name) and name not in after.functions:
            yield pair.at_after(
                CODE, call,
                f"left as written: `{callee}(...)` is a set-up helper the migration could not convert, "
                "taken to read the launcher's rank and world size, join the process group and record them "
                "(`args.rank`, `args.gpu`, `args.distributed`); beside the Accelerator it would join the "
                "group twice. Its module not in the run, migrate them together (`accel-migrate main.py "
                "utils.py`, or the folder); in the run, its body does more than that set-up (another "
                "launcher's variables, a print it silences): replace the call by hand with the "
                "Accelerator's values",
            )
            continue
        if name in _WRAPS or _SETUP_HELPER.search(name):
            what = f"`{callee}(...)` still runs beside the Accelerator"
        elif any(c in name.lower() for c in _COLLECTIVES) and not callee.startswith("accelerator") and not _guarded(after, call):
            what = f"the collective `{callee}(...)` is still called by hand beside the Accelerator"
        else:
            continue
        yield pair.at_after(
            CODE, call,
            f"left as written: {what} (the work would be done twice, or on processes the "
            "Accelerator does not know); every piece of the hand-made distribution must go or "
            "become the Accelerator's",
        )


def _accelerator_above(program: Program, call: ast.Call) -> bool:
    """A module-level `accelerator = Accelerator(...)` before the call's line."""
    return any(
        isinstance(a.value, ast.Call) and last(call_name(a.value)) == "Accelerator" and a.value.lineno < call.lineno
        and isinstance(program.scope_of.get(a.value, program.tree), ast.Module)
        for a in program.assigns
    )


def _place(pair: Pair, node: ast.AST) -> tuple[int, int]:
    problem = pair.at_after("", node, "")
    return problem.line, problem.col


def _guarded(program: Program, call: ast.Call) -> bool:
    """Under `if dist.is_initialized():` a collective runs on the Accelerator's own
    process group when there is one, and not at all on one process."""
    return any(isinstance(a, ast.If) and "is_initialized" in ast.unparse(a.test) for a in program.ancestors(call))


def _inside_forward(program: Program, call: ast.Call) -> bool:
    """`nn.parallel.data_parallel(...)` inside a model's forward is the model's own
    business (and a no-op on one device); it is reported by the rules, not refused."""
    return any(isinstance(a, ast.FunctionDef) and a.name == "forward" for a in program.ancestors(call))


def _prepared_twice(pair: Pair) -> Iterator[Problem]:
    program = pair.after
    for prepare in program.prepares:
        args = [a for a in prepare.args if a]
        for a in args:
            for b in args:
                if a != b and any(dotted(v) == a for v in program.values_of(b)):
                    yield pair.at_after(
                        CODE, prepare.call,
                        f"left as written: `{a}` and `{b}` are the same object, and prepare() would "
                        "wrap it twice; pass it once",
                    )
                    return
