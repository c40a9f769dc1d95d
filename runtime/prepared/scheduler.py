"""PreparedScheduler: a learning-rate scheduler that advances with the data actually consumed.

It steps only after a real optimizer step, and as many times as there are processes, so
a schedule sized in single-process batches keeps its shape on N processes.
"""

from __future__ import annotations

from typing import Any, Sequence

from runtime.accumulation import GradientSync
from runtime.prepared.optimizer import PreparedOptimizer


class PreparedScheduler:
    """Steps the wrapped scheduler by the number of single-process batches each step consumed.

    The convention (shared with the migrator, and Hugging Face Accelerate's):

    * A scheduler passed to `prepare()` steps `num_processes` times per real optimizer
      step (once with `split_batches=True` or `step_scheduler_with_optimizer=False`), and
      not at all when the optimizer step was skipped (an accumulation micro step, or an
      fp16 overflow). Use it for a scheduler stepped per batch whose length does not come
      from `len(dataloader)`::

          scheduler = StepLR(optimizer, step_size=1000)       # 1000 single-process batches
          model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
          for batch in loader:
              ...; optimizer.step(); scheduler.step()          # on 2 processes: advances 2 per step

    * A scheduler sized from `len(dataloader)` is built *after* prepare from the prepared
      (per-process) length and is not passed to prepare; it steps once per batch::

          model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
          scheduler = OneCycleLR(optimizer, max_lr=0.1, total_steps=epochs * len(loader))

    * A scheduler stepped once per epoch is not passed to prepare::

          scheduler = CosineAnnealingLR(optimizer, T_max=epochs)   # scheduler.step() after each epoch

    In every case the learning rate over a run on N processes is the single-process one
    as a function of the data consumed.
    """

    def __init__(
        self,
        scheduler: Any,
        optimizers: Sequence[PreparedOptimizer],
        sync: GradientSync,
        steps_per_update: int,
        step_with_optimizer: bool = True,
    ) -> None:
        self.scheduler = scheduler
        self.optimizers = list(optimizers)
        self._sync = sync
        self._steps_per_update = steps_per_update
        self._step_with_optimizer = step_with_optimizer

    def step(self, *args: Any, **kwargs: Any) -> None:
        if not self._step_with_optimizer:
            self.scheduler.step(*args, **kwargs)
            return
        if not self._sync.sync_gradients:
            return
        if any(optimizer.step_was_skipped for optimizer in self.optimizers):
            return
        for _ in range(self._steps_per_update):
            if self._finished():
                break
            self.scheduler.step(*args, **kwargs)

    def _finished(self) -> bool:
        # OneCycleLR raises when stepped past total_steps; N steps per update can overshoot it.
        total = getattr(self.scheduler, "total_steps", None)
        return total is not None and getattr(self.scheduler, "last_epoch", 0) >= total

    def get_last_lr(self) -> list[float]:
        return self.scheduler.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        return self.scheduler.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state_dict)

    def __getattr__(self, name: str) -> Any:
        # Everything else (get_lr, last_epoch, base_lrs, ...) is the wrapped scheduler's.
        if name == "scheduler":
            raise AttributeError(name)
        return getattr(self.scheduler, name)

    def __repr__(self) -> str:
        return f"PreparedScheduler({self.scheduler!r})"
