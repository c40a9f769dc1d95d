"""A prepared shuffled DataLoader visits the samples in the original's order.

On 1 process it yields the unprepared loader's batches; on N processes, step k's batches
from all ranks together are the original's batch k at an N times larger batch size. This
is what lets a 2-process run equal the original at the global batch (DESIGN.md).
"""

from __future__ import annotations

import json

import pytest

from tests.equivalence import runner

SCRIPT = runner.REPO / "tests" / "equivalence" / "scripts" / "shuffle_order.py"


def reference(batch_size: int, generator: bool) -> list[list[list[int]]]:
    """The plain torch loader's batches per epoch, with the script's RNG use."""
    import torch
    from torch.utils.data import DataLoader

    state = torch.get_rng_state()
    try:
        torch.manual_seed(0)
        own = {"generator": torch.Generator().manual_seed(5)} if generator else {}
        loader = DataLoader(list(range(32)), batch_size=batch_size, shuffle=True, **own)
        epochs = []
        for _ in range(2):
            epochs.append([batch.tolist() for batch in loader])
            torch.rand(3)
        return epochs
    finally:
        torch.set_rng_state(state)


def batches(run: runner.Run, rank: int) -> list[list[list[int]]]:
    epochs: list[list[list[int]]] = [[], []]
    for line in run.output.splitlines():
        line = line.split("]:", 1)[-1]
        if line.startswith("{"):
            record = json.loads(line)
            if record["rank"] == rank:
                epochs[record["epoch"]].append(record["batch"])
    return epochs


@pytest.mark.parametrize("generator", [False, True], ids=["global-rng", "own-generator"])
def test_one_process_keeps_the_order(tmp_path, generator):
    args = ["--batch-size", "4", *(["--generator"] if generator else [])]
    run = runner.run(runner.python_cmd(SCRIPT, args), tmp_path, timeout=120)
    assert run.returncode == 0, run.output[-3000:]
    assert batches(run, 0) == reference(4, generator)


@pytest.mark.parametrize("generator", [False, True], ids=["global-rng", "own-generator"])
def test_two_processes_split_the_global_batch(tmp_path, generator):
    args = ["--batch-size", "4", *(["--generator"] if generator else [])]
    run = runner.run(runner.accel_launch_cmd(SCRIPT, args, 2), tmp_path, timeout=180, env=runner.TEE_ENV)
    assert run.returncode == 0, run.output[-3000:]
    rank0, rank1 = batches(run, 0), batches(run, 1)
    together = [[a + b for a, b in zip(e0, e1)] for e0, e1 in zip(rank0, rank1)]
    assert together == reference(8, generator)
