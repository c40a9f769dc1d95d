"""A per-batch scheduler is prepared in a run of epochs, not in a run counted in batches
(migrator/analysis/counted_loops.py)."""

from __future__ import annotations

import textwrap

import pytest

from migrator.api import migrate_source
from migrator.config import Config

SCRIPT = textwrap.dedent('''\
    import torch
    from torch.utils.data import DataLoader, TensorDataset


    def main(total=20):
        data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
        loader = DataLoader(data, batch_size=8, shuffle=True)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 5)
        {loop}
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
                scheduler.step()
                {end}
''')

COUNTED = [
    ("itrs = 0\n    while True:\n        for x, y in loader:\n            itrs += 1", "if itrs >= total:\n                    return"),
    ("i = 0\n    while i <= total:\n        for x, y in loader:\n            i += 1", "pass"),
    # epochs written as a `for`, the run ended by the count of batches
    ("itrs = 0\n    for epoch in range(1000):\n        for x, y in loader:\n            itrs += 1", "if itrs >= total:\n                    break"),
]
EPOCHS = [
    ("epoch = 0\n    while epoch < total:\n        epoch += 1\n        for x, y in loader:", "pass"),
    ("step = 0\n    for epoch in range(total):\n        for x, y in loader:\n            step += 1", "if step % 10 == 0:\n                    print(step)"),
    # a comparison of the count of batches that only logs does not end the run
    ("step, epoch = 0, 0\n    while epoch < total:\n        epoch += 1\n        for x, y in loader:\n            step += 1",
     "if step > 5:\n                    print(step)"),
]


def _prepared(loop: str, end: str) -> str:
    text = SCRIPT.replace("{loop}", loop).replace("{end}", end)
    compile(text, "train.py", "exec")
    after = migrate_source(text, "train.py", Config()).after
    return next(line for line in after.splitlines() if "accelerator.prepare(" in line)


@pytest.mark.parametrize("loop,end", COUNTED)
def test_a_scheduler_of_a_run_counted_in_batches_is_not_prepared(loop, end) -> None:
    assert "scheduler" not in _prepared(loop, end)


@pytest.mark.parametrize("loop,end", EPOCHS)
def test_a_scheduler_of_a_run_of_epochs_is_prepared(loop, end) -> None:
    assert "scheduler" in _prepared(loop, end)
