"""AM916: a file trains by hand, but nothing in it was migrated or reported."""

from __future__ import annotations

from migrator.rule import Example, Rule


class UnmigratedTrainingCode(Rule):
    """## What it does
    Reported by the engine after every rule has run: when a file calls `.backward()`,
    steps an optimizer or clips gradients by hand, and got neither a change nor a single
    finding, the first few of those calls are named. It is the last safety net behind the
    rules, so that no file with training code is passed over with "Nothing to migrate".

    Two shapes without a backward of their own are named too: a file that wraps a model
    in `DataParallel` and builds its optimizer where no set-up could be read (a base
    trainer whose optimizer comes from a factory), and a file that runs the training of
    another file of the project (`trainer.train_step(...)` on a class whose methods call
    backward, `engine.train(...)`) and was neither migrated nor reported, alone (the
    pre-commit hook's case) or in a run that could not migrate the two together.

    ## Why is this bad?
    Training code whose set-up lives elsewhere (a `Trainer` subclass whose model and
    optimizer come from a base class in another module, a framework-style loop) trains
    without the Accelerator: no loss scaling or accumulation in its backward, and its
    metrics are this process's share only. Silence would let that ship.

    ## Example
    ```python
    class Trainer(BaseTrainer):
        def _train_epoch(self, epoch):
            for data, target in self.data_loader:
                self.optimizer.zero_grad()
                loss = self.criterion(self.model(data), target)
                loss.backward()
                self.optimizer.step()
    ```

    Use instead: migrate this file together with the one that builds the model,
    optimizer and loaders, or hand the Accelerator in by hand:
    ```python
    self.accelerator.backward(loss)
    ```
    """

    code = "AM916"
    name = "unmigrated-training-code"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "import torch\n\n\nclass Trainer(BaseTrainer):\n    def train_epoch(self):\n"
                "        for data, target in self.data_loader:\n"
                "            self.optimizer.zero_grad()\n"
                "            loss = self.criterion(self.model(data), target)\n"
                "            loss.backward()\n            self.optimizer.step()\n"
            ),
            at=("9:13", "10:13"),
        ),
    )
