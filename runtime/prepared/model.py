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
    if precision.dtype is not None and not isinstance(model.__dict__.get("forward"), _AutocastForward):
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
    return _AutocastForward(forward, precision)


class _AutocastForward:
    """The model's forward run in autocast, its half-precision outputs made float32.

    A class rather than a closure so that a model pickled whole (`torch.save(model)`, a
    checkpoint holding the model object) can be written: it pickles as the model's own
    forward, so the file loads where this runtime is not installed, as the plain model."""

    def __init__(self, forward: Callable[..., Any], precision: Precision) -> None:
        functools.update_wrapper(self, forward)
        self._forward = forward
        self._precision = precision

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._precision.autocast():
            outputs = self._forward(*args, **kwargs)
        return map_tensors(_to_float32, outputs)

    def __reduce__(self) -> tuple[Any, ...]:
        # a bound method pickles as `getattr(model, "forward")`: read on the class, it needs no
        # state of the half-built model, nor this runtime
        return self._forward.__reduce__()


def _to_float32(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.float() if tensor.dtype in (torch.float16, torch.bfloat16) else tensor
