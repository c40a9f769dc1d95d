"""runtime/prepared/dataloader.py with each rank simulated in this one process.

Without a process group the seed broadcast is a no-op, so seeding every simulated rank
alike stands in for the agreement the broadcast gives real processes.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from runtime import set_seed
from runtime.accumulation import GradientSync
from runtime.prepared.dataloader import PreparedDataLoader
from runtime.process import ProcessInfo

DATA = TensorDataset(torch.arange(10))


def prepared(loader, rank=0, world=2, sync=None, **options):
    info = ProcessInfo(rank=rank, world_size=world, local_rank=rank, local_world_size=world)
    return PreparedDataLoader(loader, info, sync or GradientSync(), torch.device("cpu"), **options)


def indices(loader):
    return [batch[0].tolist() for batch in loader]


def test_length_is_this_processes_share_and_batches_are_disjoint():
    ranks = [prepared(DataLoader(DATA, batch_size=2), rank=r) for r in range(2)]
    assert [len(r) for r in ranks] == [3, 3]
    assert indices(ranks[0]) == [[0, 1], [4, 5], [8, 9]]
    assert indices(ranks[1]) == [[2, 3], [6, 7], [0, 1]]  # the last round is padded from the start


def test_one_process_shuffles_exactly_like_the_unprepared_loader():
    set_seed(0)
    plain = [indices(DataLoader(DATA, batch_size=3, shuffle=True)) for _ in range(2)]
    set_seed(0)
    loader = prepared(DataLoader(DATA, batch_size=3, shuffle=True), world=1)
    assert [indices(loader) for _ in range(2)] == plain


def test_shuffle_is_shared_by_ranks_and_changes_every_epoch():
    epochs = []
    for rank in range(2):
        set_seed(1)
        loader = prepared(DataLoader(DATA, batch_size=1, shuffle=True), rank=rank)
        epochs.append([sum(indices(loader), []) for _ in range(2)])
    for epoch in range(2):
        assert sorted(epochs[0][epoch] + epochs[1][epoch]) == list(range(10))
    assert epochs[0][0] != epochs[0][1]


def test_last_batch_flag_and_remainder_reach_gradient_sync():
    sync = GradientSync()
    loader = prepared(DataLoader(TensorDataset(torch.arange(7)), batch_size=2), sync=sync)
    seen = [(sync.end_of_dataloader, sync.remainder) for _ in loader]
    assert [end for end, _ in seen] == [False, True]
    assert seen[-1][1] == 3, "7 samples: the last round of 4 holds 3 real ones"
    assert not sync.end_of_dataloader, "the flag is cleared when the pass ends"


def test_state_resumes_mid_epoch_with_the_same_shuffle():
    set_seed(2)
    full = indices(prepared(DataLoader(DATA, batch_size=1, shuffle=True), world=1))
    set_seed(2)
    loader = prepared(DataLoader(DATA, batch_size=1, shuffle=True), world=1)
    taken = []
    for batch in loader:
        taken.append(batch[0].tolist())
        if len(taken) == 4:
            state = loader.state_dict()
            break
    assert state["epoch"] == 0 and state["position"] == 4
    set_seed(99)  # the resuming process's own RNG plays no part
    restored = prepared(DataLoader(DATA, batch_size=1, shuffle=True), world=1)
    restored.load_state_dict(state)
    assert taken + indices(restored) == full
    assert restored.state_dict() == {"epoch": 1, "position": 0, "seed": None}


def test_batch_size_none_and_custom_batch_samplers_are_sharded():
    unbatched = prepared(DataLoader(DATA, batch_size=None), rank=1)
    assert [t[0].item() for t in unbatched] == [1, 3, 5, 7, 9]
    custom = prepared(DataLoader(DATA, batch_sampler=[[0, 1, 2], [3], [4, 5]]), rank=1)
    assert indices(custom) == [[3], [0, 1, 2]]


def test_batches_move_to_the_device_inside_containers():
    loader = prepared(DataLoader(DATA, batch_size=5, collate_fn=lambda items: {"x": [torch.stack([i[0] for i in items])]}))
    batch = next(iter(loader))
    assert batch["x"][0].device.type == "cpu"


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(5))


def test_iterable_dataset_is_split_and_workers_are_refused():
    assert [b.tolist() for b in prepared(DataLoader(Stream(), batch_size=2), rank=1)] == [[2, 3], [1, 2]]
    with pytest.raises(ValueError, match="num_workers=0"):
        prepared(DataLoader(Stream(), batch_size=2, num_workers=1))


def test_split_batches_needs_a_divisible_batch_size():
    with pytest.raises(ValueError, match="divisible"):
        prepared(DataLoader(DATA, batch_size=3), split_batches=True)


class _NormalisingLoader(DataLoader):
    """A project's loader class with what its trainer reads (yassouali's MEAN/STD)."""

    MEAN = (0.5, 0.5, 0.5)

    def __init__(self, dataset, batch_size):
        super().__init__(dataset, batch_size=batch_size, shuffle=False)
        self.STD = (0.25, 0.25, 0.25)

    def split_validation(self):
        return "validation"


def test_what_a_loader_subclass_adds_is_read_through_the_prepared_loader():
    loader = prepared(_NormalisingLoader(DATA, batch_size=2))
    assert loader.MEAN == (0.5, 0.5, 0.5) and loader.STD == (0.25, 0.25, 0.25)
    assert loader.split_validation() == "validation"
    assert len(loader) == 3 and indices(loader)[0] == [0, 1]  # the prepared loader's own batching wins
    assert loader.batch_size == 2  # this process's batch size, as the trainer reads it

    with pytest.raises(AttributeError):
        loader.not_an_attribute


def test_batch_size_reads_this_processes_batch_size():
    assert prepared(DataLoader(DATA, batch_size=4)).batch_size == 4
    assert prepared(DataLoader(DATA, batch_size=4), world=1).batch_size == 4
    assert prepared(DataLoader(DATA, batch_size=4), split_batches=True).batch_size == 2
    assert prepared(DataLoader(DATA, batch_size=None)).batch_size is None  # one sample at a time, as given
    assert indices(prepared(DataLoader(DATA, batch_size=4), rank=1)) == [[4, 5, 6, 7], [2, 3, 4, 5]]


def test_total_batch_size_counts_every_process():
    assert prepared(DataLoader(DATA, batch_size=4)).total_batch_size == 8
    assert prepared(DataLoader(DATA, batch_size=4), split_batches=True).total_batch_size == 4
