"""How models are shared: one process, DistributedDataParallel, or fully sharded (FSDP2).

The strategy is chosen once when the Accelerator is built; nothing else branches on it.
It also decides what follows from how a model is held: which parameters an optimizer
must update, how the full state dict is read, and how save_state writes models.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, Protocol

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from runtime import checkpoint
from runtime.checkpoint import Checkpointables
from runtime.precision import Precision
from runtime.process import DistributedType, ProcessInfo

if TYPE_CHECKING:
    from runtime.fsdp_plugin import FullyShardedDataParallelPlugin


class Strategy(Protocol):
    """What the Accelerator needs to know about the way processes share a model."""

    @property
    def distributed_type(self) -> DistributedType: ...

    # True when wrap_model puts the model on the device itself (FSDP: unit by unit, as it shards).
    places_model: bool

    def wrap_model(self, model: nn.Module) -> nn.Module: ...

    def unwrap_model(self, model: nn.Module) -> nn.Module: ...

    def no_sync(self, model: nn.Module) -> ContextManager[None]: ...

    def adopt_optimizer(self, optimizer: torch.optim.Optimizer) -> None: ...

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]: ...

    def save_state(self, directory: str | Path, objects: Checkpointables, precision: Precision, info: ProcessInfo) -> Path: ...

    def load_state(self, directory: str | Path, objects: Checkpointables, precision: Precision, info: ProcessInfo) -> None: ...


class _Replicated:
    """Every process holds the whole model: state is read from the module, saved once."""

    places_model = False

    def __init__(self, info: ProcessInfo) -> None:
        self.distributed_type = info.distributed_type

    def unwrap_model(self, model: nn.Module) -> nn.Module:
        return unwrap_module(model)

    def adopt_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """The optimizer's parameters are the model's own: nothing to change."""

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        return self.unwrap_model(model).state_dict()

    def save_state(self, directory: str | Path, objects: Checkpointables, precision: Precision, info: ProcessInfo) -> Path:
        models = [self.unwrap_model(model) for model in objects.models]
        return checkpoint.save_state(directory, objects, models, precision, info)

    def load_state(self, directory: str | Path, objects: Checkpointables, precision: Precision, info: ProcessInfo) -> None:
        models = [self.unwrap_model(model) for model in objects.models]
        checkpoint.load_state(directory, objects, models, precision, info)


class SingleProcess(_Replicated):
    """Nothing to share: the model is used as it is."""

    def wrap_model(self, model: nn.Module) -> nn.Module:
        return model

    def no_sync(self, model: nn.Module) -> ContextManager[None]:
        return contextlib.nullcontext()


class DDP(_Replicated):
    """DistributedDataParallel: gradients are averaged across processes during backward."""

    def __init__(self, info: ProcessInfo, options: dict[str, Any] | None = None) -> None:
        super().__init__(info)
        self._device = torch.device(info.device)
        self._options = dict(options or {})  # DistributedDataParallelKwargs.to_kwargs()

    def wrap_model(self, model: nn.Module) -> nn.Module:
        if isinstance(model, DistributedDataParallel):
            return model
        if not any(p.requires_grad for p in model.parameters()):
            # DDP refuses a module with nothing to train (e.g. a frozen teacher); it needs no syncing.
            return model
        device_ids = [self._device.index] if self._device.type == "cuda" else None
        _standard_buffer_strides(model)
        return DistributedDataParallel(model, device_ids=device_ids, **self._options)

    def no_sync(self, model: nn.Module) -> ContextManager[None]:
        if isinstance(model, DistributedDataParallel):
            return model.no_sync()
        return contextlib.nullcontext()


def _standard_buffer_strides(model: nn.Module) -> None:
    """Give every buffer the strides of a fresh tensor of its shape. DDP copies the
    buffers it broadcasts back into them, and that copy fails ("some elements ... refer
    to a single memory location") for a view such as `pe.unsqueeze(0).transpose(0, 1)`,
    the positional encoding of PyTorch's own Transformer example (pytorch/pytorch#68407).
    The values are unchanged; only the layout is."""
    for module in model.modules():
        for name, buffer in list(module._buffers.items()):
            if buffer is not None and buffer.stride() != torch.empty(buffer.shape).stride():
                module._buffers[name] = buffer.clone(memory_format=torch.contiguous_format)


def choose_strategy(
    info: ProcessInfo, fsdp_plugin: FullyShardedDataParallelPlugin | None = None, ddp_options: dict[str, Any] | None = None
) -> Strategy:
    """FSDP when asked for in a launched job, else DDP on several processes, else the model as it is.

    A plugin in a plain `python train.py` run (no process group) has nothing to shard over
    and is ignored, so the same script also runs unlaunched. `ddp_options` are the DDP
    wrap's keyword arguments (they mean nothing to one process or to FSDP).
    """
    if fsdp_plugin is not None and info.launched:
        from runtime.fsdp import FSDP  # torch.distributed.fsdp takes seconds to import

        return FSDP(info, fsdp_plugin)
    return DDP(info, ddp_options) if info.world_size > 1 else SingleProcess(info)


def full_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """A sharded DTensor (e.g. a norm over FSDP gradients) as one plain tensor; others as they are."""
    gather = getattr(tensor, "full_tensor", None)
    return gather() if gather is not None else tensor


def compiled_module(model: nn.Module) -> nn.Module | None:
    """torch.compile's OptimizedModule inside DistributedDataParallel / DataParallel, if the
    user compiled the module; None otherwise, and None for one compiled around the wrapper
    (`torch.compile(prepared)`): its state dict would carry the wrapper's `module.` keys."""
    while isinstance(model, (DistributedDataParallel, nn.DataParallel)):
        model = model.module
    inner = getattr(model, "_orig_mod", None)
    return model if isinstance(inner, nn.Module) and not isinstance(inner, (DistributedDataParallel, nn.DataParallel)) else None


def unwrap_module(model: nn.Module) -> nn.Module:
    """The user's module inside DistributedDataParallel / DataParallel and torch.compile, in
    whichever order they wrap it (CycleGAN compiles its nets after they are prepared)."""
    while True:
        if isinstance(model, (DistributedDataParallel, nn.DataParallel)):
            model = model.module
            continue
        compiled = getattr(model, "_orig_mod", None)  # torch.compile's OptimizedModule
        if not isinstance(compiled, nn.Module):
            return model
        model = compiled
