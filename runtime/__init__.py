"""The distributed runtime migrated scripts import: `from runtime import Accelerator, set_seed`
(and, in a notebook, `notebook_launcher`; for the DDP wrap's options, `DistributedDataParallelKwargs`).

Importing it has no side effects: no environment reads, no device probing, no warning filters.
The public names load on first use (PEP 562), so `accel-launch` can start, and say clearly
that torch is missing, without importing torch itself.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "Accelerator": "runtime.accelerator",
    "DistributedDataParallelKwargs": "runtime.kwargs_handlers",
    "FullyShardedDataParallelPlugin": "runtime.fsdp_plugin",
    "notebook_launcher": "runtime.notebook",
    "set_seed": "runtime.rng",
}

__all__ = [*_PUBLIC, "__version__"]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
