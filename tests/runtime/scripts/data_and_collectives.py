"""Sharding, shuffling, gather_for_metrics and the collectives, checked across processes.

Run under accel-launch with 2 processes. Every check asserts with its own message; rank 0
also writes the observed shards to OUT/shards.json for the test to look at.
"""

import argparse
import json
import os
import random

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, WeightedRandomSampler

from runtime import Accelerator, set_seed

SIZE = 11  # divisible neither by 2 processes nor by the global batch of 4


class Indices(Dataset):
    def __len__(self):
        return SIZE

    def __getitem__(self, i):
        return {"index": torch.tensor(i), "pair": (torch.tensor([i, -i]), float(i))}


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(SIZE))


def epoch(acc, loader):
    """This process's indices, and the gather_for_metrics result, over one pass."""
    mine, gathered = [], []
    for batch in loader:
        index = batch["index"] if isinstance(batch, dict) else batch
        assert index.device.type == acc.device.type, f"batch not moved to {acc.device}: {index.device}"
        mine += index.tolist()
        gathered += acc.gather_for_metrics(index).tolist()
    return mine, gathered


def check_sharding(acc, seed):
    set_seed(seed)
    loader = acc.prepare(DataLoader(Indices(), batch_size=2, shuffle=True))
    lengths = acc.gather(torch.tensor(len(loader))).tolist()
    assert lengths == [3, 3], f"len(loader) must be this process's share, evened out: {lengths}"
    epochs = [epoch(acc, loader) for _ in range(2)]
    for number, (mine, gathered) in enumerate(epochs):
        assert sorted(gathered) == list(range(SIZE)), (
            f"epoch {number}: gather_for_metrics must return exactly the dataset, got {sorted(gathered)}"
        )
    orders = [gathered for _, gathered in epochs]
    assert orders[0] != orders[1], "the shuffle must change between epochs without set_epoch"
    shards = acc.gather_for_metrics([epochs[0][0]], use_gather_object=True)
    return [mine for mine, _ in epochs], shards


def check_uneven(acc):
    """even_batches=False: no padding, so the shards are disjoint and cover the data once."""
    uneven = Accelerator(even_batches=False)
    loader = uneven.prepare(DataLoader(Indices(), batch_size=2, shuffle=True))
    mine, _ = [], None
    for batch in loader:
        mine += batch["index"].tolist()
    everyone = uneven.gather_for_metrics([mine], use_gather_object=True)
    flat = [i for part in everyone for i in part]
    assert sorted(flat) == list(range(SIZE)), f"uneven shards must cover each sample exactly once: {everyone}"


def check_split_and_iterable(acc):
    split = Accelerator(split_batches=True)
    loader = split.prepare(DataLoader(Indices(), batch_size=4))
    sizes = [len(b["index"]) for b in loader]
    assert sizes[0] == 2, f"split_batches must give each process half the batch, got {sizes}"
    gathered = []
    for batch in loader:
        gathered += split.gather_for_metrics(batch["index"]).tolist()
    assert gathered == list(range(SIZE)), f"split_batches + gather_for_metrics must give the dataset in order: {gathered}"
    stream = acc.prepare(DataLoader(Stream(), batch_size=2))
    _, from_stream = epoch(acc, stream)
    assert from_stream == list(range(SIZE)), f"IterableDataset shards must gather back to the stream: {from_stream}"


class OwnShuffle:
    """A batch sampler of the user's that shuffles with Python's `random` (RetinaNet's
    AspectRatioBasedSampler): each process would draw its own order."""

    def __init__(self, size, batch):
        self.size, self.batch = size, batch

    def __iter__(self):
        order = list(range(self.size))
        random.shuffle(order)
        return iter([order[i:i + self.batch] for i in range(0, self.size, self.batch)])

    def __len__(self):
        return (self.size + self.batch - 1) // self.batch


def check_own_randomness(acc):
    """Samplers whose randomness the processes do not agree on (a custom batch sampler
    on `random`, WeightedRandomSampler on the global torch RNG), each process seeded on
    its own: process 0 draws the epoch and shares it, so the shards still cover the data
    exactly once."""
    random.seed(acc.process_index)
    torch.manual_seed(100 + acc.process_index)
    # sizes that split evenly between 2 processes: no padded round to repeat a sample
    weighted = WeightedRandomSampler([1.0] * 10 + [0.0] * (SIZE - 10), 10, replacement=False)
    loaders = {
        "custom batch sampler": DataLoader(Indices(), batch_sampler=OwnShuffle(8, 2)),
        "WeightedRandomSampler": DataLoader(Indices(), batch_size=1, sampler=weighted),
    }
    sizes = {"custom batch sampler": 8, "WeightedRandomSampler": 10}
    for name, loader in loaders.items():
        loader = acc.prepare(loader)
        mine = [i for batch in loader for i in batch["index"].tolist()]
        everyone = acc.gather_for_metrics([mine], use_gather_object=True)
        flat = sorted(i for part in everyone for i in part)
        assert flat == list(range(sizes[name])), f"{name}: the shards must cover the data once, got {everyone}"


def check_collectives(acc, out):
    rank = acc.process_index
    value = torch.tensor([float(rank + 1)], device=acc.device)
    assert acc.reduce(value, "sum").item() == 3.0, "reduce(sum) of 1 and 2 must be 3"
    assert acc.reduce(value, "mean").item() == 1.5, "reduce(mean) of 1 and 2 must be 1.5"
    ragged = torch.arange(rank + 1)
    padded = acc.pad_across_processes(ragged, pad_index=-1)
    assert padded.tolist() == ([0, -1] if rank == 0 else [0, 1]), f"pad_across_processes: {padded.tolist()}"
    assert acc.gather(ragged).tolist() == [0, 0, 1], f"gather of uneven tensors: {acc.gather(ragged).tolist()}"
    nested = acc.gather({"a": value, "b": [value * 10]})
    assert nested["b"][0].tolist() == [10.0, 20.0], f"gather of nested structures: {nested}"
    with acc.split_between_processes(list(range(5))) as share:
        assert share == ([0, 1, 2] if rank == 0 else [3, 4]), f"split_between_processes: {share}"
    marker = os.path.join(out, "written_by_main_first")
    with acc.main_process_first():
        if acc.is_main_process:
            open(marker, "w").close()
        else:
            assert os.path.exists(marker), "main_process_first: the main process must run the block first"
    assert acc.on_main_process(lambda: "ran")() == ("ran" if rank == 0 else None), "on_main_process"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--expect-precision", default="no")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    acc = Accelerator()
    assert acc.num_processes == 2, f"expected 2 processes, got {acc.num_processes}"
    assert acc.distributed_type.value == "MULTI_CPU", f"distributed_type: {acc.distributed_type}"
    assert acc.is_main_process == (acc.process_index == 0), "is_main_process must be rank 0 only"
    assert acc.mixed_precision == args.expect_precision, (
        f"the launcher's --mixed-precision must reach the script: {acc.mixed_precision} != {args.expect_precision}"
    )
    first, shards = check_sharding(acc, seed=11)
    again, _ = check_sharding(acc, seed=11)
    other, _ = check_sharding(acc, seed=12)
    assert first == again, "the same seed must give the same shards"
    assert first != other, "another seed must give other shards"
    check_uneven(acc)
    check_own_randomness(acc)
    check_split_and_iterable(acc)
    check_collectives(acc, args.out)
    if acc.is_main_process:
        with open(os.path.join(args.out, "shards.json"), "w") as f:
            json.dump({"epoch0_by_rank": shards, "rank0_epochs": first}, f)
    acc.end_training()


if __name__ == "__main__":
    main()
