"""PreparedOptimizer: the user's optimizer, stepping only when gradients are synchronised.

It also routes the step through the fp16 GradScaler and remembers whether that step was
skipped, which the prepared scheduler needs.
"""

from __future__ import annotations

from typing import Any

import torch

from runtime.accumulation import GradientSync
from runtime.precision import Precision


class PreparedOptimizer(torch.optim.Optimizer):
    """Wraps an optimizer so accumulation micro steps neither step nor zero the gradients.

    It subclasses Optimizer (without running its __init__) so that torch's schedulers accept
    it, and shares `param_groups` and `state` with the wrapped optimizer, so a learning rate
    set on either is seen by both.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, sync: GradientSync, precision: Precision) -> None:
        self.optimizer = optimizer
        self._sync = sync
        self._precision = precision
        self._step_was_skipped = False

    @property
    def param_groups(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return self.optimizer.param_groups

    @param_groups.setter
    def param_groups(self, groups: list[dict[str, Any]]) -> None:
        self.optimizer.param_groups = groups

    @property
    def state(self) -> Any:  # type: ignore[override]
        return self.optimizer.state

    @property
    def defaults(self) -> dict[str, Any]:  # type: ignore[override]
        return self.optimizer.defaults

    @property
    def step_was_skipped(self) -> bool:
        """True when the last step() did not update the parameters (accumulating, or fp16 overflow)."""
        return self._step_was_skipped

    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        """Step (unless accumulating); returns what the optimizer's step returns, so
        `loss = optimizer.step(closure)` (LBFGS) keeps working. Accelerate returns None."""
        if not self._sync.sync_gradients:
            self._step_was_skipped = True
            return None
        stepped, result = self._precision.step(self.optimizer, closure)
        self._step_was_skipped = not stepped
        return result

    def zero_grad(self, set_to_none: bool = True) -> None:
        if self._sync.sync_gradients:
            self.optimizer.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        self.optimizer.add_param_group(param_group)

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state_dict)

    def train(self) -> None:
        """For optimizers with train/eval modes (schedule-free); a no-op otherwise."""
        if hasattr(self.optimizer, "train"):
            self.optimizer.train()

    def eval(self) -> None:
        if hasattr(self.optimizer, "eval"):
            self.optimizer.eval()

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__.copy()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"PreparedOptimizer({self.optimizer!r})"
