"""runtime/prepared/sharding.py: every rank simulated in one process, over many sizes.

The property gather_for_metrics relies on: concatenating the ranks' batches round by round
(rank order), and cutting the last round to `remainder`, gives back the epoch exactly.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import BatchSampler, SequentialSampler

from runtime.prepared.sharding import IterableShard, ShardedBatchSampler

SIZES = dict(n=st.integers(0, 40), batch=st.integers(1, 6), world=st.integers(1, 4))


def shard_all(n, batch, world, drop_last=False, even=True, split=False, skip=0):
    per_rank, remainders = [], []
    for rank in range(world):
        source = BatchSampler(SequentialSampler(range(n)), batch * (world if split else 1), drop_last)
        sampler = ShardedBatchSampler(
            source, rank, world, batch_size=source.batch_size, drop_last=drop_last, split_batches=split, even_batches=even
        )
        sampler.skip_rounds = skip
        batches = list(sampler)
        if skip == 0:
            assert len(sampler) == len(batches), f"rank {rank}: len() {len(sampler)} != {len(batches)} batches"
        per_rank.append(batches)
        remainders.append(sampler.remainder)
    return per_rank, remainders


def gathered(per_rank, remainder):
    rounds = max(map(len, per_rank), default=0)
    out = []
    for i in range(rounds):
        this_round = [index for batches in per_rank if i < len(batches) for index in batches[i]]
        if i == rounds - 1 and remainder:
            this_round = this_round[:remainder]
        out += this_round
    return out


@settings(max_examples=150, deadline=None)
@given(**SIZES, split=st.booleans())
def test_even_batches_gather_back_to_the_epoch(n, batch, world, split):
    per_rank, remainders = shard_all(n, batch, world, split=split)
    assert len(set(remainders)) == 1
    assert len({len(b) for b in per_rank}) == 1, "even_batches: every rank has as many batches"
    if world > 1:  # a single process is never padded
        assert all(len(b) == batch for batches in per_rank for b in batches), "every batch is full"
    assert gathered(per_rank, remainders[0]) == list(range(n))


@settings(max_examples=150, deadline=None)
@given(**SIZES, split=st.booleans())
def test_uneven_batches_cover_the_epoch_once_without_padding(n, batch, world, split):
    per_rank, remainders = shard_all(n, batch, world, even=False, split=split)
    assert remainders == [0] * world
    assert gathered(per_rank, 0) == list(range(n))


@settings(max_examples=150, deadline=None)
@given(**SIZES, split=st.booleans())
def test_drop_last_keeps_only_complete_global_batches(n, batch, world, split):
    per_rank, _ = shard_all(n, batch, world, drop_last=True, split=split)
    kept = n // (batch * world) * batch * world
    assert gathered(per_rank, 0) == list(range(kept))


@settings(max_examples=60, deadline=None)
@given(**SIZES, skip=st.integers(0, 5))
def test_skipping_rounds_resumes_where_the_epoch_was(n, batch, world, skip):
    full, _ = shard_all(n, batch, world)
    resumed, _ = shard_all(n, batch, world, skip=skip)
    assert resumed == [batches[skip:] for batches in full]


def test_custom_batch_sampler_with_unknown_size_pads_with_whole_batches():
    source = [[0, 1, 2], [3], [4, 5]]  # any iterable of index lists, uneven sizes
    per_rank = [list(ShardedBatchSampler(source, r, 2, batch_size=None, drop_last=False)) for r in range(2)]
    assert per_rank == [[[0, 1, 2], [4, 5]], [[3], [0, 1, 2]]]


@settings(max_examples=100, deadline=None)
@given(**SIZES, even=st.booleans(), drop_last=st.booleans())
def test_iterable_shards_gather_back_to_the_stream(n, batch, world, even, drop_last):
    shards = [IterableShard(range(n), r, world, batch, drop_last=drop_last, even_batches=even) for r in range(world)]
    items = [list(shard) for shard in shards]
    for shard, got in zip(shards, items):
        assert len(shard) == len(got)
    rounds = [[chunk[i : i + batch] for i in range(0, len(chunk), batch)] for chunk in items]
    expected = list(range(n // (batch * world) * batch * world)) if drop_last else list(range(n))
    assert gathered(rounds, shards[0].remainder) == expected
