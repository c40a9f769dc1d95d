"""Saving and restoring a training run: weights, optimizers, schedulers, data position, RNGs.

Shared state (identical on every process under DDP) is written once, by the main process;
each process writes its own RNG state. Loading reads everything on every process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from runtime.precision import Precision
from runtime.process import ProcessInfo
from runtime.rng import capture_rng_state, restore_rng_state

_SCALER = "scaler.pt"


@dataclass
class Checkpointables:
    """Everything `save_state` writes, in prepare() order; owned by one Accelerator."""

    models: list[nn.Module] = field(default_factory=list)
    optimizers: list[Any] = field(default_factory=list)
    schedulers: list[Any] = field(default_factory=list)
    dataloaders: list[Any] = field(default_factory=list)
    custom: list[Any] = field(default_factory=list)

    def groups(self) -> dict[str, list[Any]]:
        """File prefix -> objects with state_dict/load_state_dict (models handled apart)."""
        return {
            "optimizer": self.optimizers,
            "scheduler": self.schedulers,
            "dataloader": self.dataloaders,
            "custom": self.custom,
        }


def save_state(
    output_dir: str | os.PathLike[str],
    objects: Checkpointables,
    unwrapped_models: list[nn.Module],
    precision: Precision,
    info: ProcessInfo,
) -> Path:
    """Write the run's state under `output_dir`; every process must call it."""
    directory = Path(output_dir)
    directory.mkdir(parents=True, exist_ok=True)
    if info.is_main_process:
        for index, model in enumerate(unwrapped_models):
            torch.save(model.state_dict(), directory / f"model_{index}.pt")
        for prefix, items in objects.groups().items():
            for index, item in enumerate(items):
                torch.save(item.state_dict(), directory / f"{prefix}_{index}.pt")
        torch.save(precision.state_dict(), directory / _SCALER)
    torch.save(capture_rng_state(), directory / f"rng_state_{info.rank}.pt")
    return directory


def load_state(
    input_dir: str | os.PathLike[str],
    objects: Checkpointables,
    unwrapped_models: list[nn.Module],
    precision: Precision,
    info: ProcessInfo,
) -> None:
    """Restore what `save_state` wrote, into the objects prepared in the same order."""
    directory = Path(input_dir)
    if not directory.is_dir():
        raise FileNotFoundError(f"no checkpoint directory at {directory}")
    device = torch.device(info.device)
    for index, model in enumerate(unwrapped_models):
        model.load_state_dict(_load(directory / f"model_{index}.pt", device, weights_only=True))
    for prefix, items in objects.groups().items():
        for index, item in enumerate(items):
            # Schedulers and custom objects may hold arbitrary Python values: these are files
            # this runtime wrote, so load checkpoints you trust (as with torch.load itself).
            trusted_only = prefix in ("optimizer", "dataloader")
            item.load_state_dict(_load(directory / f"{prefix}_{index}.pt", device, weights_only=trusted_only))
    if (directory / _SCALER).exists():
        precision.load_state_dict(_load(directory / _SCALER, device, weights_only=True))
    restore_rng_state(_load(directory / f"rng_state_{info.rank}.pt", torch.device("cpu"), weights_only=False))


def _load(path: Path, device: torch.device, *, weights_only: bool) -> Any:
    if not path.exists():
        raise FileNotFoundError(
            f"checkpoint file {path} is missing: load_state needs the same objects prepared in the "
            f"same order, and the same number of processes, as the run that saved it"
        )
    return torch.load(path, map_location=device, weights_only=weights_only)
