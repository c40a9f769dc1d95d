"""Gradient accumulation bookkeeping: is this micro step the one that syncs and steps?

GradientSync is a plain object owned by one Accelerator and handed explicitly to the
optimizer, scheduler and dataloader wrappers; there is no global state.
"""

from __future__ import annotations

from typing import Protocol


class LoaderProgress(Protocol):
    """What a dataloader being iterated tells the rest of the runtime."""

    @property
    def at_last_batch(self) -> bool: ...

    @property
    def remainder(self) -> int: ...


class GradientSync:
    """Counts micro steps and says when gradients are synchronised (`sync_gradients`).

    With `steps` micro steps per optimizer step, gradients sync on every `steps`-th call
    to `advance()`, and always on the last batch of the dataloader being iterated, so an
    epoch never ends with gradients left unapplied (as in Hugging Face Accelerate).
    """

    def __init__(self, steps: int = 1) -> None:
        self.steps = steps
        self.micro_step = 0
        self.sync_gradients = True
        self._loaders: list[LoaderProgress] = []

    @property
    def steps(self) -> int:
        return self._steps

    @steps.setter
    def steps(self, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"gradient_accumulation_steps must be a positive integer, got {value!r}")
        self._steps = value

    def advance(self) -> None:
        """Enter the next micro step (called by `Accelerator.accumulate`)."""
        if self.end_of_dataloader:
            self.micro_step = 0
            self.sync_gradients = True
        else:
            self.micro_step += 1
            self.sync_gradients = self.micro_step % self.steps == 0

    def loader_started(self, loader: LoaderProgress) -> None:
        """A prepared dataloader began an epoch; nested loops (evaluation) stack."""
        self._loaders.append(loader)

    def loader_finished(self, loader: LoaderProgress) -> None:
        if loader in self._loaders:
            self._loaders.remove(loader)

    @property
    def end_of_dataloader(self) -> bool:
        """True while the innermost dataloader being iterated is on its last batch."""
        return bool(self._loaders) and self._loaders[-1].at_last_batch

    @property
    def remainder(self) -> int:
        """Real samples in the innermost loader's last global batch (0: nothing padded)."""
        return self._loaders[-1].remainder if self._loaders else 0
