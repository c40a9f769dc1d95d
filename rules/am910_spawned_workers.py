"""AM910: processes started by the script itself (`mp.spawn`)."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.removal import line_of_small
from migrator.analysis.names import dotted_name
from migrator.analysis.spawn import LOCAL_RANK_ARG, LOCAL_WORLD_SIZE_ARG, WORLD_SIZE_ARG
from migrator.edits import Edit, ImportChange, remove, replace
from migrator.rule import Example, FixAvailability, Rule


class SpawnedWorkers(Rule):
    """## What it does
    Turns a script that starts its own workers with
    `torch.multiprocessing.spawn(worker, nprocs=N, args=(...))` into the program the
    launcher starts once per process: the spawn becomes a direct call of the worker,
    given this process's index on its machine (`int(os.environ.get("LOCAL_RANK", 0))`)
    where the spawn gave the spawned index, and the launcher's process count
    (`int(os.environ.get("WORLD_SIZE", 1))`) where it passed `N` on; a count the script
    keeps in an attribute (`nprocs=args.gpus`, read back by the workers) is set to the
    launcher's count of processes on this machine before the call
    (`args.gpus = int(os.environ.get("LOCAL_WORLD_SIZE", 1))`). Inside the worker
    the rest is the torchrun conversion: the address and port picked by hand
    (`os.environ["MASTER_ADDR"]`, `["MASTER_PORT"]`) go, `init_process_group`,
    `set_device`, the DDP wrap and the DistributedSampler go (with a `setup(rank,
    world_size)` helper they empty, and a `cleanup()` helper that only left the group
    becomes `accelerator.end_training()`), moves to the index (`model.to(rank)`) go, rank
    tests on the index (`if rank == 0:`) become `accelerator.is_main_process`, and reads
    of the count that stay (`batch_size // world_size`) become
    `accelerator.num_processes`, so a batch split between the workers is still split
    between the processes. The index is followed where the worker hands it to a function
    or class of the same file (`Trainer(model, ..., rank)` storing it as `self.gpu_id`):
    moves to it and tests on it there convert the same way.

    Why `LOCAL_RANK` from the environment and not `accelerator.local_process_index`:
    the Accelerator is created inside the worker (the scope that trains), after the call
    that hands the index over; at the call site there is none to ask. Under the launcher
    LOCAL_RANK is the index the spawn used to give (the GPU this process drives), and on a
    single process it is 0, as `nprocs=1` gave.

    ## Why is this bad?
    The migrated script is started once per process by the launcher, and the
    Accelerator finds its rank from it. A script that also spawns workers starts N×N
    processes, each joining a group of its own on a port picked by hand.

    ## What is left as written
    The whole file stays as written, with this finding saying why, when the spawn is not
    the whole way the script runs distributed: the worker is not a function defined once
    at module level in this file, or is also called or read elsewhere (an `else:` that
    runs it alone); `args=` is not a tuple written out; the spawn's result is used, or it
    sets `join=False`, `daemon=True` or another start method; the worker never joins a
    process group (data workers), or the workers share a model's memory
    (`model.share_memory()`, Hogwild); the index is stored on an object other than the
    `self` of a class of this file (`args.gpu = gpu`, `args.rank += gpu`) or passed on to
    a function the migration does not follow (of another module, or a library's); the workers join a run
    across several machines (`world_size=` not the count this machine starts); the index
    picks the process's share of the data by hand (`data[rank::world_size]`: the prepared
    loader would shard that share again); code runs after the spawn (an evaluation the
    parent ran once when the workers were done), or the spawn runs in a loop.
    `mp.Process` and `start_processes` are not converted either.

    ## Known limits
    What the parent did before the spawn (parse arguments, download a data set, create a
    folder) runs on every launched process once converted: a download there is reported
    by AM220, a file written there by AM517. A `--port` option the script no longer reads
    is left declared. A worker that counts the GPUs itself (`batch_size //
    torch.cuda.device_count()`) keeps that count, which is the launcher's only when it
    starts one process per GPU.

    ## Example
    ```python
    def worker(rank, world_size):
        dist.init_process_group("nccl", rank=rank, world_size=world_size)
        ...

    mp.spawn(worker, nprocs=world_size, args=(world_size,))
    ```

    Use instead:
    ```python
    def worker(rank, world_size):
        accelerator = Accelerator()
        ...

    worker(int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)))
    # launched as: accel-launch --nproc-per-node 4 train.py
    ```
    """

    code = "AM910"
    name = "spawned-workers"
    message = "`{call}` sets up worker processes by hand; {advice}{note}"
    fix_title = "Call the worker directly; the launcher starts the processes"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nimport torch.multiprocessing as mp\n\ndef main_worker(gpu, args):\n"
                "    model = torch.nn.Linear(2, 2)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n\n"
                "def main():\n    mp.spawn(main_worker, nprocs=2, args=(None,))\n"
            ),
            at=("9:5",),
        ),
        Example(
            before=(
                "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\n\n"
                "def worker(rank, world_size):\n"
                "    dist.init_process_group(\"gloo\", rank=rank, world_size=world_size)\n"
                "    model = torch.nn.Linear(2, 2)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "    dist.destroy_process_group()\n\n\n"
                "if __name__ == \"__main__\":\n    mp.spawn(worker, nprocs=2, args=(2,))\n"
            ),
            after=(
                "import torch\nimport os\nfrom runtime import Accelerator\n\n\n"
                "def worker(rank, world_size):\n    accelerator = Accelerator()\n"
                "    model = torch.nn.Linear(2, 2)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "    model, opt = accelerator.prepare(model, opt)\n    accelerator.end_training()\n\n\n"
                "if __name__ == \"__main__\":\n"
                "    worker(int(os.environ.get(\"LOCAL_RANK\", 0)), int(os.environ.get(\"WORLD_SIZE\", 1)))\n"
            ),
            at=("14:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        facts = analysis.patterns.distribution
        for line in facts.master_env:
            shown = cst.Module([]).code_for_node(line.targets[0].target).strip()  # type: ignore[attr-defined]
            advice = "the launcher sets the rendezvous address and port for every process"
            self.report(line, edits=facts.removal(line), call=f"{shown} = ...", advice=advice, note="")
        for spawn in facts.spawns:
            advice = f"call `{spawn.worker_name}` directly and launch with `accel-launch --nproc-per-node N`"
            fields = {"call": cst.Module([]).code_for_node(spawn.call.func).strip() + "(...)", "advice": advice}
            if spawn.reason is not None:
                self.report(spawn.call, note=f" (left as written: {spawn.reason})", **fields)
                continue
            args = [LOCAL_RANK_ARG]
            shown = cst.Module([]).code_for_node(spawn.nprocs).strip() if spawn.nprocs is not None else None
            for arg in spawn.args:
                code = cst.Module([]).code_for_node(arg).strip()
                args.append(WORLD_SIZE_ARG if spawn.world and code == shown else code)
            direct = cst.parse_expression(f"{spawn.worker_name}({', '.join(args)})")
            edits = [replace(spawn.call, direct)]
            count = _count_attribute(spawn.nprocs)
            line = analysis.parent(analysis.parent(spawn.call))
            if count is not None and isinstance(line, cst.SimpleStatementLine):
                # `nprocs=args.gpus`: whatever reads `args.gpus` (the worker's batch split,
                # an lr scaled by it) reads the count of processes on this machine, now the
                # launcher's
                small = analysis.parent(spawn.call)
                body = [cst.Expr(direct) if s is small else s for s in line.body]
                setting = cst.parse_statement(f"{count} = {LOCAL_WORLD_SIZE_ARG}\n")
                edits = [Edit(line, replacement=line.with_changes(body=body), before=(setting,))]
            if spawn.unused is not None:
                edits.append(remove(line_of_small(spawn.unused, analysis.parent)))
            self.report(
                spawn.call, edits=edits, add_imports=[ImportChange("os")],
                remove_imports=facts.import_cleanup, note="", **fields,
            )


def _count_attribute(nprocs: cst.BaseExpression | None) -> str | None:
    """`args.gpus` for `nprocs=args.gpus`: an attribute the script may read again."""
    name = dotted_name(nprocs) if isinstance(nprocs, cst.Attribute) else None
    return name
