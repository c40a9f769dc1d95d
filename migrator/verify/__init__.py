"""The verifier: holds a migrated module to what a distributed program needs, reading
only the text before and after, independently of the rules that made the edits.

A non-empty answer means the migration is not written; each Problem becomes a finding
("left as written: ...") at the place in the original the user has to look at. Nothing
here edits anything.
"""

from __future__ import annotations

from migrator.verify import (
    batch, branches, checkpoints, collectives, devices, distribution, double_backward, intervals, names, processes, retries, setup,
    signature, stale, sums,
)
from migrator.verify.pair import Pair, Problem

__all__ = ["Problem", "verify"]

_CHECKS = (
    names.check, branches.check, setup.check, stale.check, devices.check, signature.check, distribution.check, processes.check,
    batch.check, checkpoints.check, sums.check, collectives.check, retries.check, intervals.check, double_backward.check,
)


def verify(
    before: str, after: str, called_elsewhere: frozenset[str] = frozenset(), placing: frozenset[str] = frozenset(),
    called_unthreaded: frozenset[str] = frozenset(), refused_trainers: frozenset[str] = frozenset(),
    module_readers: frozenset[str] = frozenset(), model_wrappers: frozenset[str] = frozenset(),
    sharded_loaders: frozenset[str] = frozenset(), sharded_params: frozenset[str] = frozenset(),
    wrapped_models: frozenset[str] = frozenset(),
) -> list[Problem]:
    """The reasons `after` is not a coherent migration of `before` (no blocking one:
    write it, with the non-blocking ones as findings). `called_elsewhere`: names of this
    file that other files of the run call once per process; `placing`: calls of the run's
    code that moves tensors to a device itself; `called_unthreaded`: names other files of
    the run call without the run threading them; `refused_trainers`: calls of the run's
    training functions whose own migration was left as written; `module_readers`: calls of
    other files' code that reads `.module` of a model it is handed; `model_wrappers`: calls
    of other files' helpers that wrap the model they are handed; `sharded_loaders`: calls of
    other files' functions returning loaders a DistributedSampler shards; `sharded_params`:
    parameters of this file's functions that callers hand such a loader; `wrapped_models`:
    calls of other files' functions returning a model they wrap in DataParallel (Pair)."""
    pair = Pair.of(
        before, after, called_elsewhere, placing, called_unthreaded, refused_trainers, module_readers, model_wrappers,
        sharded_loaders, sharded_params, wrapped_models,
    )
    if pair is None:  # LibCST accepted what ast rejects (or the reverse): nothing to say
        return []
    found = {p for check in _CHECKS for p in check(pair)}
    return sorted(found, key=lambda p: (p.line, p.col, p.code, p.message))
