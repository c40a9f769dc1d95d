"""Run one function over many items in worker processes, results in the items' order.

Workers only compute: they never print, write files or touch the cache (the parent does
all of that). An item whose function raises, or whose worker process dies, becomes the
caller's `on_crash` value for that item; the other items still go through.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import TYPE_CHECKING, Callable, Iterator, Sequence, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

T = TypeVar("T")
R = TypeVar("R")

# Items per task: large enough that pickling and queueing cost little next to a file's
# migration, small enough that ordered results stream and the workers stay balanced.
MAX_CHUNK = 8


class Crash:
    """What an item's function raised, as one line: type, message and the innermost frame
    (enough for a bug report, no traceback on the user's terminal)."""

    def __init__(self, summary: str) -> None:
        self.summary = summary

    @classmethod
    def from_exception(cls, exc: BaseException) -> Crash:
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
        return cls(f"{type(exc).__name__}: {exc}{where}")

    def __repr__(self) -> str:
        return f"Crash({self.summary!r})"


def cpu_count() -> int:
    """The CPUs this process may run on (affinity and cgroup-aware where the OS says)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def map_ordered(
    func: Callable[[T], R],
    items: Sequence[T],
    jobs: int,
    on_crash: Callable[[T, Crash], R],
) -> Iterator[R]:
    """`func(item)` for every item, yielded in the order of `items`, same as `jobs=1`.

    One job (or one item) runs in this process. Otherwise a process pool runs chunks of
    items; `func` must be picklable (a module-level function). Ctrl-C stops the workers
    and re-raises KeyboardInterrupt here.
    """
    if jobs <= 1 or len(items) <= 1:
        for item in items:
            yield _guarded(func, item, on_crash)
        return
    yield from _pooled(func, items, min(jobs, len(items)), on_crash)


def _guarded(func: Callable[[T], R], item: T, on_crash: Callable[[T, Crash], R]) -> R:
    outcome = _call(func, item)
    return on_crash(item, outcome) if isinstance(outcome, Crash) else outcome


def _call(func: Callable[[T], R], item: T) -> R | Crash:
    """Runs in the worker: an exception becomes a picklable Crash value, never a raise
    (one raise would end `Executor.map` for every later item)."""
    try:
        return func(item)
    except Exception as exc:  # noqa: BLE001 - a bug in the tool, reported for this item
        return Crash.from_exception(exc)


def _call_chunk(func: Callable[[T], R], chunk: Sequence[T]) -> list[R | Crash]:
    return [_call(func, item) for item in chunk]


def _pooled(func: Callable[[T], R], items: Sequence[T], jobs: int, on_crash: Callable[[T, Crash], R]) -> Iterator[R]:
    from concurrent.futures.process import BrokenProcessPool

    size = max(1, min(MAX_CHUNK, len(items) // (jobs * 4)))
    chunks = [items[i:i + size] for i in range(0, len(items), size)]
    done = 0
    pool = _pool(jobs)
    try:
        futures = [pool.submit(_call_chunk, func, chunk) for chunk in chunks]
        for chunk, future in zip(chunks, futures):
            try:
                outcomes = future.result()
            except BrokenProcessPool:
                break  # a worker died (killed, out of memory, a crash in native code)
            for item, outcome in zip(chunk, outcomes):
                yield on_crash(item, outcome) if isinstance(outcome, Crash) else outcome
            done += len(chunk)
    except BaseException:  # Ctrl-C, or the consumer stopped early: end the workers now
        _stop(pool)
        raise
    pool.shutdown(wait=True)
    if done < len(items):
        yield from _one_by_one(func, items[done:], on_crash)


def _one_by_one(func: Callable[[T], R], items: Sequence[T], on_crash: Callable[[T, Crash], R]) -> Iterator[R]:
    """After a worker died: each remaining item alone in a one-process pool, so the item
    that kills its worker is the one reported, and the rest still go through."""
    from concurrent.futures.process import BrokenProcessPool

    pool = _pool(1)
    try:
        for item in items:
            try:
                outcome = pool.submit(_call, func, item).result()
            except BrokenProcessPool as exc:
                pool.shutdown(wait=True)
                pool = _pool(1)
                outcome = Crash(f"the worker process died ({exc})")
            yield on_crash(item, outcome) if isinstance(outcome, Crash) else outcome
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown(wait=True)


def _pool(jobs: int) -> ProcessPoolExecutor:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # fork: workers start at once with everything the parent imported (LibCST, the rules).
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else None)
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_ignore_sigint)


def _ignore_sigint() -> None:
    """Ctrl-C reaches the whole process group; only the parent acts on it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers without waiting for their chunks."""
    processes = list(getattr(pool, "_processes", {}).values())  # no public API for this
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
