"""analysis/spawn.py: which `mp.spawn` converts, why another stays, and where the worker's
index is followed."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from migrator.analysis import ScriptAnalysis, analyze


def _analyze(code: str) -> ScriptAnalysis:
    module = cst.parse_module(textwrap.dedent(code))
    return analyze(MetadataWrapper(module, unsafe_skip_copy=True))


WORKER = """
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

def worker(rank, world_size, args):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = torch.nn.Linear(2, 2).to(rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    {body}

def main(args):
    world_size = torch.cuda.device_count()
    {spawn}
"""


def _spawn(body: str = "pass", spawn: str = "mp.spawn(worker, nprocs=world_size, args=(world_size, args))"):
    analysis = _analyze(WORKER.format(body=body, spawn=spawn))
    (found,) = analysis.patterns.distribution.spawns
    return found


def test_a_whole_spawn_converts_with_its_index_and_count_parameters() -> None:
    spawn = _spawn()
    assert spawn.reason is None
    assert (spawn.worker_name, spawn.rank, spawn.world) == ("worker", "rank", "world_size")
    assert spawn.unused is not None  # `world_size = torch.cuda.device_count()` read only by the spawn


@pytest.mark.parametrize(
    "spawn, words",
    [
        ("mp.spawn(worker, nprocs=world_size, args=make_args(args))", "not a tuple written out"),
        ("mp.spawn(worker, nprocs=world_size, args=(world_size, args), join=False)", "join=False"),
        ("context = mp.spawn(worker, nprocs=world_size, args=(world_size, args), join=False)", "result is used"),
        ("mp.spawn(worker, nprocs=world_size, args=(world_size,))", "parameters do not match"),
        ("mp.start_processes(worker, nprocs=world_size, args=(world_size, args))", "not `torch.multiprocessing.spawn`"),
    ],
)
def test_a_spawn_that_is_not_the_whole_story_stays(spawn: str, words: str) -> None:
    assert words in (_spawn(spawn=spawn).reason or "")


def test_a_worker_also_run_alone_stays() -> None:
    spawn = _spawn(spawn="if args.spawn:\n        mp.spawn(worker, nprocs=world_size, args=(world_size, args))\n    else:\n        worker(0, 1, args)")
    assert "also runs without the spawn (`worker(0, 1, args)`)" in (spawn.reason or "")


@pytest.mark.parametrize(
    "body, words",
    [
        ("args.gpu = rank", "`args.gpu = rank` keeps the worker's index"),
        ("args.rank += rank", "`args.rank += rank` keeps the worker's index"),
        ("train(model, optimizer, rank)", "passed on to `train(...)`"),
    ],
)
def test_an_index_the_migration_cannot_follow_leaves_the_spawn(body: str, words: str) -> None:
    assert words in (_spawn(body=body).reason or "")


def test_the_index_is_followed_into_a_class_of_the_file() -> None:
    code = WORKER.format(
        body="Trainer(model, optimizer, rank).fit()",
        spawn="mp.spawn(worker, nprocs=world_size, args=(world_size, args))",
    ) + textwrap.dedent(
        """
        class Trainer:
            def __init__(self, model, optimizer, gpu_id):
                self.gpu_id = gpu_id
                self.model = model

            def fit(self):
                if self.gpu_id == 0:
                    print(f"on {self.gpu_id}")
        """
    )
    analysis = _analyze(code)
    (spawn,) = analysis.patterns.distribution.spawns
    assert spawn.reason is None
    tests = [analysis.module.code_for_node(t.node) for t in analysis.patterns.distribution.rank_tests]
    assert tests == ["self.gpu_id == 0"]


def test_hogwild_and_workers_without_a_group_stay() -> None:
    hogwild = _analyze(
        """
        import torch.multiprocessing as mp
        def train(index, model):
            pass
        model.share_memory()
        mp.spawn(train, args=(model,), nprocs=4)
        """
    )
    assert "share_memory" in hogwild.patterns.distribution.spawns[0].reason
    no_group = _analyze(
        """
        import torch.multiprocessing as mp
        def load(index, paths):
            pass
        mp.spawn(load, args=(paths,), nprocs=4)
        """
    )
    assert "never joins a process group" in no_group.patterns.distribution.spawns[0].reason


@pytest.mark.parametrize(
    "body",
    [
        "shard = data[rank::world_size]",
        "global_rank = args.node * 4 + rank\n    shard = data[global_rank::world_size]",
        "part = Subset(data, range(rank, len(data), world_size))",
    ],
)
def test_an_index_that_shards_the_data_by_hand_leaves_the_spawn(body: str) -> None:
    reason = _spawn(body=body).reason or ""
    assert "picks its share by hand" in reason or "passed on to `range(...)`" in reason


@pytest.mark.parametrize(
    "spawn, words",
    [
        ("mp.spawn(worker, nprocs=world_size, args=(world_size, args))\n    evaluate(args)", "`evaluate(args)` runs after the workers"),
        ("for size in (1, 2):\n        mp.spawn(worker, nprocs=size, args=(size, args))", "in a loop"),
    ],
)
def test_a_spawn_that_is_not_the_last_thing_the_script_does_stays(spawn: str, words: str) -> None:
    assert words in (_spawn(spawn=spawn).reason or "")


def test_code_after_the_call_of_the_function_that_spawns_counts_too() -> None:
    code = WORKER.format(body="pass", spawn="mp.spawn(worker, nprocs=world_size, args=(world_size, args))")
    analysis = _analyze(code + "\nif __name__ == '__main__':\n    main(None)\n    print('all done')\n")
    assert "`print('all done')` runs after the workers" in analysis.patterns.distribution.spawns[0].reason
    fine = _analyze(code + "\nif __name__ == '__main__':\n    main(None)\n")
    assert fine.patterns.distribution.spawns[0].reason is None
