"""Prepares a model: device placement, autocast around forward, and the strategy's wrapper.

The prepared model is a plain torch module (the model itself, or DistributedDataParallel
around it), so state_dict keys, isinstance checks and hooks behave as users expect. Around
DDP it also answers for the user's module (`model.generate`, `model.config`): see
runtime/prepared/ddp.py, a deliberate difference from Accelerate.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from runtime.distributed import Strategy
from runtime.nested import map_tensors
from runtime.precision import Precision
from runtime.prepared.ddp import ForwardingDDP

# Where the model's own forward is kept while the autocast one is installed.
_ORIGINAL_FORWARD = "_accel_original_forward"


def prepare_model(
    model: nn.Module, strategy: Strategy, precision: Precision, device: torch.device | None
) -> nn.Module:
    """Move `model` to `device` (None: leave it), autocast its forward, and wrap it."""
    if device is not None:
        model = model.to(device)
    if precision.dtype is not None and not hasattr(model, _ORIGINAL_FORWARD):
        # As in Accelerate: under mixed precision the forward runs in autocast and returns
        # float32, so a script needs no `with autocast()` of its own.
        setattr(model, _ORIGINAL_FORWARD, model.forward)
        model.forward = _autocast_forward(model.forward, precision)
    wrapped = strategy.wrap_model(model)
    if type(wrapped) is DistributedDataParallel:
        # The subclass adds behaviour only (no state), so the strategy keeps building plain DDP.
        wrapped.__class__ = ForwardingDDP
    return wrapped


def remove_autocast(model: nn.Module) -> nn.Module:
    """Restore the model's own forward (for `unwrap_model(keep_fp32_wrapper=False)`)."""
    original = model.__dict__.pop(_ORIGINAL_FORWARD, None)
    if original is not None:
        model.__dict__.pop("forward", None)
    return model


def _autocast_forward(forward: Callable[..., Any], precision: Precision) -> Callable[..., Any]:
    @functools.wraps(forward)
    def forward_in_autocast(*args: Any, **kwargs: Any) -> Any:
        with precision.autocast():
            outputs = forward(*args, **kwargs)
        return map_tensors(_to_float32, outputs)

    return forward_in_autocast


def _to_float32(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.float() if tensor.dtype in (torch.float16, torch.bfloat16) else tensor
