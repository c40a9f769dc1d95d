"""PreparedDataLoader: this process's share of every epoch, on the right device, resumable.

It rebuilds the user's DataLoader around a sharded batch sampler (prepared/sharding.py),
agrees on each epoch's shuffle across processes without `set_epoch`, tells the runtime
when the last batch is out (for accumulation and gather_for_metrics), and records the
epoch and position so `load_state` continues exactly where `save_state` stopped.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, IterableDataset, RandomSampler, SequentialSampler

from runtime.accumulation import GradientSync
from runtime.collectives import broadcast, broadcast_object
from runtime.nested import send_to_device
from runtime.prepared.sharding import AgreedBatches, IterableShard, SeededRandomSampler, ShardedBatchSampler
from runtime.process import ProcessInfo


class PreparedDataLoader(DataLoader):
    """A DataLoader (isinstance holds) yielding this process's batches, moved to the device.

    `len()` is this process's number of batches. Differs from Accelerate on purpose: after
    `load_state` the next iteration resumes mid-epoch by itself (no `skip_first_batches`),
    and what the user's own loader class adds (`loader.MEAN`, a method of a DataLoader
    subclass) is still read through the prepared one.
    """

    def __init__(
        self,
        loader: DataLoader,
        info: ProcessInfo,
        sync: GradientSync,
        device: torch.device | None,
        *,
        split_batches: bool = False,
        even_batches: bool = True,
    ) -> None:
        self._original = loader
        self._sync = sync
        self._device = device
        self._comm_device = torch.device(info.device)
        self._world = info.world_size
        self._sampler: SeededRandomSampler | None = None
        self._shard: ShardedBatchSampler | IterableShard | None = None
        dataset, batching = self._shard_loader(loader, info, split_batches, even_batches)
        super().__init__(dataset, **batching, **_worker_settings(loader))
        sharded = isinstance(self._shard, ShardedBatchSampler) and self._shard.per_process_batch_size is not None
        if sharded and loader.batch_size is not None:
            # a batch sampler leaves DataLoader's batch_size None; trainers read it (yassouali's
            # `int(np.sqrt(self.train_loader.batch_size))`): the size of this process's batches.
            # DataLoader refuses the attribute once built, and nothing of its iteration reads it.
            object.__setattr__(self, "batch_size", self._shard.per_process_batch_size)
        # Per-batch bookkeeping lives in a slotted object: DataLoader.__setattr__ is slow.
        self._pass = _Pass()
        self._resume: dict[str, Any] | None = None
        self._resume_pending = False

    def __getattr__(self, name: str) -> Any:
        """Only for names the prepared loader lacks: the original loader's (a subclass's
        `MEAN`/`STD`, `split_validation()`), where trainers written for it read them."""
        original = self.__dict__.get("_original")
        if original is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(original, name)

    def _shard_loader(
        self, loader: DataLoader, info: ProcessInfo, split: bool, even: bool
    ) -> tuple[Any, dict[str, Any]]:
        if isinstance(loader.dataset, IterableDataset):
            return self._shard_iterable(loader, info, split, even)
        sampler = loader.sampler
        if type(sampler) is RandomSampler:
            agree = self._agree if info.world_size > 1 else None
            sampler = self._sampler = SeededRandomSampler(sampler, agree)
        collate = loader.collate_fn
        source = loader.batch_sampler
        if source is None:  # automatic batching off: one sample per "batch"
            source, batch_size, drop_last = BatchSampler(sampler, 1, False), 1, False
            collate = _FirstItem(collate)
        elif type(source) is BatchSampler:
            batch_size, drop_last = source.batch_size, source.drop_last
            source = BatchSampler(sampler, batch_size, drop_last)
        else:  # a custom batch sampler: shard its batches as they come
            batch_size, drop_last = None, bool(getattr(source, "drop_last", False))
        if info.world_size > 1 and _own_order(loader.batch_sampler, sampler):
            source = AgreedBatches(source, self._agree_batches, info.rank == 0)
        self._shard = ShardedBatchSampler(
            source,
            info.rank,
            info.world_size,
            batch_size=batch_size,
            drop_last=drop_last,
            split_batches=split,
            even_batches=even,
        )
        return loader.dataset, {"batch_sampler": self._shard, "collate_fn": collate}

    def _shard_iterable(
        self, loader: DataLoader, info: ProcessInfo, split: bool, even: bool
    ) -> tuple[Any, dict[str, Any]]:
        batching = {"batch_size": loader.batch_size, "drop_last": loader.drop_last, "collate_fn": loader.collate_fn}
        if info.world_size == 1:
            return loader.dataset, batching
        if loader.batch_size is None or loader.num_workers > 0:
            raise ValueError(
                "prepare() shards an IterableDataset on several processes only with a batch_size "
                "and num_workers=0 (each worker would otherwise see its own stream and the padded "
                "last batch could not be found); use a map-style Dataset, or shard it yourself"
            )
        size = loader.batch_size
        if split:
            if size % info.world_size:
                raise ValueError(f"split_batches=True needs a batch size divisible by {info.world_size}, got {size}")
            size //= info.world_size
        self._shard = IterableShard(
            loader.dataset, info.rank, info.world_size, size, drop_last=loader.drop_last, even_batches=even
        )
        return self._shard, {**batching, "batch_size": size}

    def _agree_batches(self, batches: list[list[Any]] | None) -> list[list[Any]]:
        """Process 0's batches of this epoch on every process."""
        return broadcast_object(batches, self._comm_device)

    def _agree(self, value: torch.Tensor) -> torch.Tensor:
        """Process 0's shuffle seed (or generator state) on every process, so all shard one order."""
        return broadcast(value.to(self._comm_device)).cpu()

    @property
    def remainder(self) -> int:
        """Real samples in this epoch's padded last global batch; 0 when nothing was padded."""
        return self._shard.remainder if self._shard is not None else 0

    @property
    def total_batch_size(self) -> int | None:
        """Samples per step over all processes (Accelerate's name)."""
        if isinstance(self._shard, ShardedBatchSampler) and self._shard.per_process_batch_size is not None:
            return self._shard.per_process_batch_size * self._world
        return None if self.batch_size is None else self.batch_size * self._world

    @property
    def at_last_batch(self) -> bool:
        """True while the batch just yielded is this pass's last one."""
        return self._pass.at_last_batch

    def set_epoch(self, epoch: int) -> None:
        """Accepted for compatibility: shuffling already changes every epoch without it."""
        self._pass.epoch = epoch

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        skip = self._begin_epoch()
        batches = self._inner_iterator(protect_rng=self._resume_pending)
        self._resume_pending = False
        self._sync.loader_started(self)
        try:
            if not isinstance(self._shard, ShardedBatchSampler):
                for _ in range(skip):  # no batch sampler to skip with: load and drop
                    next(batches, None)
            yield from self._with_last_flag(batches)
            self._pass.epoch += 1
            self._pass.position = 0
            self._pass.open = False
        finally:
            self._pass.at_last_batch = False
            self._sync.loader_finished(self)

    def _begin_epoch(self) -> int:
        """Choose this epoch's number, shuffle seed and batches to skip; returns the skip."""
        resume, self._resume = self._resume, None
        self._resume_pending = resume is not None
        progress = self._pass
        if resume is not None:
            progress.epoch, progress.position = resume["epoch"], resume["position"]
        elif progress.open:  # the previous pass was abandoned (break): this is a new epoch
            progress.epoch, progress.position = progress.epoch + 1, 0
        progress.open = True
        if self._sampler is not None:
            if resume is not None and resume.get("seed") is not None:
                self._sampler.next_seed = resume["seed"]
        if isinstance(self._shard, ShardedBatchSampler):
            self._shard.skip_rounds = progress.position
        return progress.position

    def _inner_iterator(self, protect_rng: bool) -> Iterator[Any]:
        if not protect_rng:
            return super().__iter__()
        # A resumed pass must not consume the RNG draws its first, interrupted, pass already made.
        cpu_state = torch.get_rng_state()
        own_state = self.generator.get_state() if self.generator is not None else None
        try:
            return super().__iter__()
        finally:
            torch.set_rng_state(cpu_state)
            if own_state is not None:
                self.generator.set_state(own_state)

    def _with_last_flag(self, batches: Iterator[Any]) -> Iterator[Any]:
        # Look one batch ahead, so the last batch is known while the user holds it.
        progress, device, non_blocking = self._pass, self._device, self.pin_memory
        current = next(batches, _END)
        while current is not _END:
            following = next(batches, _END)
            progress.at_last_batch = following is _END
            progress.position += 1
            yield current if device is None else send_to_device(current, device, non_blocking)
            current = following

    def state_dict(self) -> dict[str, Any]:
        """Epoch, batches already consumed in it, and its shuffle seed."""
        progress = self._pass
        if not progress.open:
            return {"epoch": progress.epoch, "position": 0, "seed": None}
        seed = self._sampler.last_seed if self._sampler is not None else None
        return {"epoch": progress.epoch, "position": progress.position, "seed": seed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next iteration continue the saved epoch after its consumed batches."""
        self._resume = dict(state)


_END = object()


class _Pass:
    """Where the loader is: epoch number, batches yielded in it, and whether it is under way."""

    __slots__ = ("epoch", "position", "open", "at_last_batch")

    def __init__(self) -> None:
        self.epoch = 0
        self.position = 0
        self.open = False
        self.at_last_batch = False


class _FirstItem:
    """Collate for automatic batching off: the sharded "batch" holds one sample."""

    def __init__(self, collate_fn: Callable[[Any], Any]) -> None:
        self.collate_fn = collate_fn

    def __call__(self, batch: list[Any]) -> Any:
        return self.collate_fn(batch[0])


def _worker_settings(loader: DataLoader) -> dict[str, Any]:
    """The loader's settings that sharding leaves as they were."""
    return {
        "num_workers": loader.num_workers,
        "pin_memory": loader.pin_memory,
        "timeout": loader.timeout,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context,
        "generator": loader.generator,
        "prefetch_factor": loader.prefetch_factor,
        "persistent_workers": loader.persistent_workers,
        "pin_memory_device": loader.pin_memory_device,
        "in_order": getattr(loader, "in_order", True),
    }


def _own_order(batch_sampler: Any, sampler: Any) -> bool:
    """The epoch's order comes from a sampler of the user's (or torch's WeightedRandomSampler,
    SubsetRandomSampler ...) whose randomness the processes do not agree on by themselves,
    and whose length is known (an endless sampler cannot be drawn ahead). A RandomSampler
    is seeded alike on every process instead; a SequentialSampler has no randomness; a
    DistributedSampler is already one process's part."""
    if batch_sampler is not None and type(batch_sampler) is not BatchSampler:
        return hasattr(batch_sampler, "__len__") and not isinstance(getattr(batch_sampler, "sampler", None), DistributedSampler)
    if isinstance(sampler, (SequentialSampler, RandomSampler, DistributedSampler)):
        return False
    return hasattr(sampler, "__len__")
