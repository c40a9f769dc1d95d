"""Options for the objects the Accelerator builds, passed as `Accelerator(kwargs_handlers=[...])`.

Same names and defaults as Hugging Face Accelerate, so a migrated script runs on either.
Only `DistributedDataParallelKwargs` exists here: the options `prepare()` hands to
`torch.nn.parallel.DistributedDataParallel` when it wraps a model on several processes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class DistributedDataParallelKwargs:
    """DistributedDataParallel's options; see its documentation for each one.

    `find_unused_parameters=True` is what a model needs when some of its parameters get no
    gradient in a step (a head whose output the loss never reads): without it DDP stops at
    the next step, waiting for gradients that never come.
    """

    dim: int = 0
    broadcast_buffers: bool = True
    bucket_cap_mb: int = 25
    find_unused_parameters: bool = False
    check_reduction: bool = False
    gradient_as_bucket_view: bool = False
    static_graph: bool = False

    def to_kwargs(self) -> dict[str, Any]:
        """The options that differ from the defaults (DDP is called with these only)."""
        default = DistributedDataParallelKwargs()
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) != getattr(default, f.name)}


def ddp_options(handlers: Iterable[object] | None) -> dict[str, Any]:
    """The DDP options the handlers ask for; a handler of any other type is a TypeError."""
    options: dict[str, Any] = {}
    seen = False
    for handler in handlers or ():
        if not isinstance(handler, DistributedDataParallelKwargs):
            raise TypeError(
                f"kwargs_handlers takes DistributedDataParallelKwargs objects; got {type(handler).__name__} "
                "(this runtime has no other kind of handler)"
            )
        if seen:
            raise ValueError("kwargs_handlers holds DistributedDataParallelKwargs twice; pass one")
        seen = True
        options = handler.to_kwargs()
    return options
