"""Splits one epoch's batches between processes, padding the last round when asked to.

Sharding works on whole batches from torch's own BatchSampler (Accelerate's scheme): in
every round of N batches, process r takes batch r. DistributedSampler's index-level
striding would put the padding duplicates in the middle of a gathered last batch, where
gather_for_metrics could not drop them by count; here they always come last.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import torch
from torch.utils.data import IterableDataset, RandomSampler, Sampler


class AgreedBatches:
    """The batches of a sampler whose order is its own affair (a custom batch sampler that
    shuffles with Python's `random`, a WeightedRandomSampler drawing from the global RNG):
    drawn once per epoch on process 0 and shared, so every process shards one list. Each
    process drawing its own, unseeded or seeded per process, would shard different orders:
    some samples taken by two processes, others by none. `share` sends process 0's list
    (the others pass None) to every process."""

    def __init__(self, source: Iterable[list[Any]], share: Callable[[list[list[Any]] | None], list[list[Any]] | None], main: bool) -> None:
        self.source = source
        self._share = share
        self._main = main

    def __iter__(self) -> Iterator[list[Any]]:
        drawn = [list(batch) for batch in self.source] if self._main else None
        shared = self._share(drawn)
        if shared is None:  # no process group to share through: one process playing rank r
            shared = [list(batch) for batch in self.source]
        return iter(shared)

    def __len__(self) -> int:
        return len(self.source)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:  # `sampler`, `drop_last`, `batch_size` of the source
        if name == "source":
            raise AttributeError(name)
        return getattr(self.source, name)


class SeededRandomSampler(RandomSampler):
    """RandomSampler whose per-epoch shuffle can be imposed (resume), agreed between processes, and read.

    It shuffles as RandomSampler does, at the same moment (when the epoch's first batch is
    drawn, after the DataLoader iterator took its own base seed): from a seed drawn from the
    global RNG, or with the user's generator itself. So one process shuffles as the
    unprepared loader would, and N processes shuffle as the unprepared loader on one.
    `agree` (set on N processes) returns process 0's value of a tensor on every process.
    """

    def __init__(self, sampler: RandomSampler, agree: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        super().__init__(
            sampler.data_source,
            replacement=sampler.replacement,
            num_samples=sampler._num_samples,
            generator=None,
        )
        self.seed_source = sampler.generator
        self.agree = agree
        # The epoch's shuffle: a seed (global RNG) or the user generator's state at its start.
        self.next_seed: int | torch.Tensor | None = None
        self.last_seed: int | torch.Tensor | None = None

    def draw_seed(self) -> int:
        """Draw a seed the way RandomSampler does, from the global RNG."""
        return int(torch.empty((), dtype=torch.int64).random_().item())

    def __iter__(self) -> Iterator[int]:
        imposed, self.next_seed = self.next_seed, None
        if self.seed_source is None:
            seed = imposed if imposed is not None else self._agreed_seed()
            self.generator = torch.Generator()
            self.generator.manual_seed(seed)
        else:  # RandomSampler permutes with the user's generator directly, not with a seed from it
            seed = imposed if imposed is not None else self.seed_source.get_state()
            if imposed is None and self.agree is not None:
                seed = self.agree(seed)
            self.seed_source.set_state(seed.cpu())  # a checkpoint may have been loaded onto a GPU
            self.generator = self.seed_source
        self.last_seed = seed
        try:
            yield from super().__iter__()
        finally:
            self.generator = None

    def _agreed_seed(self) -> int:
        seed = self.draw_seed()
        if self.agree is None:
            return seed
        return int(self.agree(torch.tensor([seed], dtype=torch.int64)).item())


class ShardedBatchSampler(Sampler[list[int]]):
    """This process's batches: batch `rank` of each round of `world` batches.

    With `split_batches`, each source batch is one round and this process takes its
    `rank`-th slice. An incomplete last round is dropped (`drop_last`), padded with indices
    from the start of the epoch so every process gets a full batch (`even_batches`), or
    left uneven. `remainder` is the number of real samples in a padded last round.
    """

    def __init__(
        self,
        batch_sampler: Iterable[list[int]],
        rank: int,
        world: int,
        *,
        batch_size: int | None,
        drop_last: bool,
        split_batches: bool = False,
        even_batches: bool = True,
    ) -> None:
        if split_batches and (batch_size is None or batch_size % world):
            raise ValueError(
                f"split_batches=True needs a batch size divisible by the {world} processes, got {batch_size}"
            )
        self.batch_sampler = batch_sampler
        self.rank, self.world = rank, world
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.split_batches = split_batches
        self.even_batches = even_batches and world > 1
        self.skip_rounds = 0
        self.remainder = 0

    @property
    def per_process_batch_size(self) -> int | None:
        if self.batch_size is None:
            return None
        return self.batch_size // self.world if self.split_batches else self.batch_size

    def __iter__(self) -> Iterator[list[int]]:
        skip, self.skip_rounds = self.skip_rounds, 0
        self.remainder = 0
        if self.world == 1:  # nothing to share: the source batches as they are, minus skipped ones
            for number, batch in enumerate(self.batch_sampler):
                if number >= skip:
                    yield batch
            return
        for number, (chunks, padded_from) in enumerate(self._rounds()):
            if number < skip:
                continue
            self.remainder = padded_from
            if self.rank < len(chunks) and chunks[self.rank]:
                yield chunks[self.rank]

    def __len__(self) -> int:
        batches = len(self.batch_sampler)  # type: ignore[arg-type]
        if self.split_batches:
            if self.even_batches or self.drop_last or batches == 0:
                return batches
            last = len(self.batch_sampler.sampler) - (batches - 1) * self.batch_size  # type: ignore[attr-defined]
            return batches - 1 + int(self.rank * self.per_process_batch_size < last)
        full, left = divmod(batches, self.world)
        if left == 0 or self.drop_last:
            return full
        return full + 1 if self.even_batches else full + int(self.rank < left)

    def _rounds(self) -> Iterator[tuple[list[list[int]], int]]:
        """Yield (one chunk per process, real samples if padded else 0) for each round."""
        first: list[list[int]] = []
        pending: list[list[int]] = []
        for batch in self.batch_sampler:
            pending.append(list(batch))
            if self.split_batches or len(pending) == self.world:
                if not first:
                    first = pending
                if not self._complete(pending):
                    break
                yield self._chunks(pending), 0
                pending = []
        if not pending:
            return
        if not first:
            first = pending
        if self.drop_last:
            return
        if not self.even_batches:
            yield self._chunks(pending), 0
            return
        yield self._padded(pending, first), sum(len(b) for b in pending)

    def _complete(self, batches: list[list[int]]) -> bool:
        if not self.split_batches and len(batches) < self.world:
            return False
        return self.batch_size is None or all(len(b) == self.batch_size for b in batches)

    def _chunks(self, batches: list[list[int]]) -> list[list[int]]:
        if not self.split_batches:
            return batches
        size = self.per_process_batch_size
        flat = batches[0]
        return [flat[r * size : (r + 1) * size] for r in range(self.world)]

    def _padded(self, batches: list[list[int]], first: list[list[int]]) -> list[list[int]]:
        if self.batch_size is None:  # a custom batch sampler: add whole batches from the start
            out = list(batches)
            out.extend(first[i % len(first)] for i in range(self.world - len(batches)))
            return out
        flat = [index for batch in batches for index in batch]
        start = [index for batch in first for index in batch]
        size = self.per_process_batch_size
        target = size * self.world
        flat.extend(start[i % len(start)] for i in range(target - len(flat)))
        return [flat[r * size : (r + 1) * size] for r in range(self.world)]


class IterableShard(IterableDataset):
    """This process's share of an IterableDataset: in each round of `world * size` items,
    the `rank`-th run of `size`; the last round is dropped, padded or left uneven as above."""

    def __init__(
        self, dataset: Iterable[Any], rank: int, world: int, size: int, *, drop_last: bool, even_batches: bool
    ) -> None:
        self.dataset = dataset
        self.rank, self.world, self.size = rank, world, size
        self.drop_last = drop_last
        self.even_batches = even_batches
        self.remainder = 0

    def __iter__(self) -> Iterator[Any]:
        self.remainder = 0
        round_size = self.world * self.size
        first: list[Any] = []
        items: list[Any] = []
        for item in self.dataset:
            items.append(item)
            if len(items) == round_size:
                first = first or items
                yield from items[self.rank * self.size : (self.rank + 1) * self.size]
                items = []
        if not items or self.drop_last:
            return
        if self.even_batches:
            self.remainder = len(items)
            start = first or list(items)
            items.extend(start[i % len(start)] for i in range(round_size - len(items)))
        yield from items[self.rank * self.size : (self.rank + 1) * self.size]

    def __len__(self) -> int:
        total = len(self.dataset)  # type: ignore[arg-type]  # TypeError, as torch's, when unknown
        full, left = divmod(total, self.world * self.size)
        if self.drop_last or left == 0:
            return full * self.size
        if self.even_batches:
            return (full + 1) * self.size
        return full * self.size + min(max(left - self.rank * self.size, 0), self.size)
