"""How models are wrapped: one process, or DistributedDataParallel over the process group.

The strategy is chosen once when the Accelerator is built; nothing else branches on the
backend.
"""

from __future__ import annotations

import contextlib
from typing import ContextManager, Protocol

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from runtime.process import ProcessInfo


class Strategy(Protocol):
    """What the Accelerator needs to know about the way processes share a model."""

    def wrap_model(self, model: nn.Module) -> nn.Module: ...

    def unwrap_model(self, model: nn.Module) -> nn.Module: ...

    def no_sync(self, model: nn.Module) -> ContextManager[None]: ...


class SingleProcess:
    """Nothing to share: the model is used as it is."""

    def wrap_model(self, model: nn.Module) -> nn.Module:
        return model

    def unwrap_model(self, model: nn.Module) -> nn.Module:
        return _unwrap(model)

    def no_sync(self, model: nn.Module) -> ContextManager[None]:
        return contextlib.nullcontext()


class DDP:
    """DistributedDataParallel: gradients are averaged across processes during backward."""

    def __init__(self, info: ProcessInfo) -> None:
        self._device = torch.device(info.device)

    def wrap_model(self, model: nn.Module) -> nn.Module:
        if isinstance(model, DistributedDataParallel):
            return model
        if not any(p.requires_grad for p in model.parameters()):
            # DDP refuses a module with nothing to train (e.g. a frozen teacher); it needs no syncing.
            return model
        device_ids = [self._device.index] if self._device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=device_ids)

    def unwrap_model(self, model: nn.Module) -> nn.Module:
        return _unwrap(model)

    def no_sync(self, model: nn.Module) -> ContextManager[None]:
        if isinstance(model, DistributedDataParallel):
            return model.no_sync()
        return contextlib.nullcontext()


def choose_strategy(info: ProcessInfo) -> Strategy:
    """DDP when there is more than one process, otherwise the model stays as it is."""
    return DDP(info) if info.world_size > 1 else SingleProcess()


def _unwrap(model: nn.Module) -> nn.Module:
    while isinstance(model, (DistributedDataParallel, nn.DataParallel)):
        model = model.module
    compiled = getattr(model, "_orig_mod", None)  # torch.compile's OptimizedModule
    return compiled if isinstance(compiled, nn.Module) else model
