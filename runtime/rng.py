"""Random number generators: seeding them all at once, and capturing/restoring their states.

Covers Python's `random`, NumPy when it is installed, torch's CPU generator and every
CUDA device's generator.
"""

from __future__ import annotations

import importlib
import os
import random
from typing import Any

import torch

from runtime.process import ENV_RANK


def set_seed(seed: int, device_specific: bool = False) -> None:
    """Seed every generator a training script uses, so runs repeat (Accelerate's `set_seed`).

    With `device_specific=True` each process adds its rank, for per-process randomness.
    """
    if device_specific:
        seed += int(os.environ.get(ENV_RANK, "0") or 0)
    random.seed(seed)
    numpy = _numpy()
    if numpy is not None:
        numpy.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # seeds the CUDA generators too, lazily


def capture_rng_state() -> dict[str, Any]:
    """Snapshot every generator's state, for a checkpoint."""
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    numpy = _numpy()
    if numpy is not None:
        state["numpy"] = numpy.random.get_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Put back the generators captured by `capture_rng_state`."""
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    numpy = _numpy()
    if numpy is not None and "numpy" in state:
        numpy.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _numpy() -> Any:
    try:
        return importlib.import_module("numpy")
    except ImportError:
        return None
