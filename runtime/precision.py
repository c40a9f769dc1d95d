"""Mixed precision: which autocast dtype to use and, for fp16, the gradient scaler.

Validates the choice against the device once; the rest of the runtime asks this object
and never looks at the precision name again.
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Iterable

import torch

from runtime.process import MIXED_PRECISION_CHOICES as CHOICES


class PrecisionError(ValueError):
    """The requested precision is unknown or cannot run on this device."""


def validate_choice(name: str | None) -> str:
    """Normalise a user's choice ("no" | "fp16" | "bf16"); None means full precision."""
    choice = "no" if name is None else str(name).strip().lower()
    if choice not in CHOICES:
        raise PrecisionError(f"mixed_precision={name!r} is not one of {', '.join(CHOICES)}")
    return choice


class Precision:
    """Autocast context plus, for fp16, a GradScaler and the bookkeeping around it.

    Build it with `Precision.for_device`, which refuses a combination that cannot run
    (fp16 without a GPU, bf16 on a GPU without bf16 support).
    """

    def __init__(self, name: str, device_type: str, scaler: torch.amp.GradScaler | None = None) -> None:
        self.name = name
        self.device_type = device_type
        self.scaler = scaler
        self._unscaled: set[int] = set()

    @classmethod
    def for_device(cls, name: str | None, device: torch.device) -> Precision:
        """Check `name` against `device` and build the matching precision."""
        choice = validate_choice(name)
        if choice == "fp16":
            if device.type != "cuda":
                raise PrecisionError(
                    "mixed_precision='fp16' needs a CUDA GPU, and this process runs on "
                    f"{device.type}; use mixed_precision='bf16' on CPU, or 'no'"
                )
            return cls(choice, device.type, torch.amp.GradScaler(device.type))
        if choice == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise PrecisionError(f"mixed_precision='bf16' is not supported by the GPU {device}; use 'fp16' or 'no'")
        return cls(choice, device.type)

    @property
    def dtype(self) -> torch.dtype | None:
        """The autocast dtype, or None when running in full precision."""
        return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(self.name)

    def autocast(self) -> ContextManager[Any]:
        """The context that runs forward passes in the lower precision (nothing for "no")."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        return self.scaler.scale(loss) if self.scaler is not None else loss

    def unscale(self, optimizer: torch.optim.Optimizer) -> None:
        """Unscale gradients once per optimizer step, so clipping sees true magnitudes."""
        if self.scaler is None or id(optimizer) in self._unscaled:
            return
        self.scaler.unscale_(optimizer)
        self._unscaled.add(id(optimizer))

    def step(self, optimizer: torch.optim.Optimizer, closure: Any = None) -> tuple[bool, Any]:
        """Step the optimizer: (False when fp16 found inf/NaN gradients and skipped it, what
        `optimizer.step` returned: the closure's loss for LBFGS-style optimizers)."""
        if self.scaler is None:
            return True, optimizer.step(closure) if closure is not None else optimizer.step()
        scale_before = self.scaler.get_scale()
        result = self.scaler.step(optimizer, closure) if closure is not None else self.scaler.step(optimizer)
        self.scaler.update()
        self._unscaled.discard(id(optimizer))
        # GradScaler lowers the scale exactly when it skipped the step (Accelerate tests the same).
        return self.scaler.get_scale() >= scale_before, result

    @property
    def loss_scale(self) -> float:
        """The current fp16 loss scale (1.0 otherwise): a norm of scaled gradients divides by it."""
        return self.scaler.get_scale() if self.scaler is not None else 1.0

    def unscale_all(self, optimizers: Iterable[torch.optim.Optimizer]) -> None:
        for optimizer in optimizers:
            self.unscale(optimizer)

    def state_dict(self) -> dict[str, Any]:
        return self.scaler.state_dict() if self.scaler is not None else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)
