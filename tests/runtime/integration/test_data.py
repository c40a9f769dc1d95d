"""Data across processes: sharding, shuffling, gather_for_metrics and the collectives.

The checks run inside scripts/data_and_collectives.py on 2 processes (each with its own
assertion message); this test launches it with --mixed-precision bf16 (the launcher's
setting must reach the script) and looks at the shards it reports.
"""

from __future__ import annotations

import json

from tests.runtime.integration.harness import launch_args, run


def test_shards_gather_and_collectives_on_two_processes(tmp_path):
    args = launch_args(
        "data_and_collectives.py", "--out", str(tmp_path), "--expect-precision", "bf16", extra=["--mixed-precision", "bf16"]
    )
    run(args, cwd=tmp_path).check()
    shards = json.loads((tmp_path / "shards.json").read_text())
    rank0, rank1 = shards["epoch0_by_rank"]
    size = 11
    assert len(rank0) == len(rank1), "even_batches: both processes get the same number of samples"
    assert set(rank0) | set(rank1) == set(range(size)), "every sample must be seen in the epoch"
    assert len(rank0) + len(rank1) - size == 1, "exactly one sample repeated to even out the last batch"
    assert rank1[-1] == rank0[0], "the padding must repeat the first sample of the epoch"
    epochs = shards["rank0_epochs"]
    assert epochs[0] != epochs[1], "rank 0's shard must change between epochs"
