"""Apply a function to every tensor inside a nested batch, keeping the container types.

Handles dicts (and Mapping subclasses), lists, tuples, namedtuples and dataclasses; any
other object is returned as it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Callable

import torch


def map_tensors(fn: Callable[[torch.Tensor], Any], data: Any) -> Any:
    """Rebuild `data` with `fn` applied to each tensor it contains."""
    if isinstance(data, torch.Tensor):
        return fn(data)
    kind = type(data)
    if kind is list or kind is tuple:  # the common case first: it runs for every batch
        mapped = [map_tensors(fn, value) for value in data]
        return mapped if kind is list else tuple(mapped)
    if isinstance(data, Mapping):
        mapped = {key: map_tensors(fn, value) for key, value in data.items()}
        try:
            return type(data)(mapped)
        except TypeError:  # a Mapping type whose constructor takes no dict
            return mapped
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(map_tensors(fn, value) for value in data))
    if isinstance(data, (list, tuple)):
        return type(data)(map_tensors(fn, value) for value in data)
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        changes = {f.name: map_tensors(fn, getattr(data, f.name)) for f in dataclasses.fields(data) if f.init}
        return dataclasses.replace(data, **changes)
    return data


def send_to_device(data: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """Move every tensor in `data` to `device` (a no-op for tensors already there)."""

    def move(tensor: torch.Tensor) -> torch.Tensor:
        return tensor if tensor.device == device else tensor.to(device, non_blocking=non_blocking)

    return map_tensors(move, data)
