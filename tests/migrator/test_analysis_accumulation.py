"""analysis/accumulation.py: hand-written gradient accumulation, rewritable or not."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrator.analysis import analyze

HEAD = """
import torch
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.zeros(8, 2))
"""


def _accumulations(loop: str):
    module = cst.parse_module(textwrap.dedent(HEAD) + textwrap.dedent(loop))
    return analyze(MetadataWrapper(module, unsafe_skip_copy=True)).patterns.accumulations


def test_the_rewritable_shape() -> None:
    (acc,) = _accumulations(
        """
        for i, x in enumerate(loader):
            loss = model(x).sum()
            loss = loss / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
        """
    )
    assert acc.migratable and acc.steps == "accum" and acc.models == ("model",)
    assert [d.kind for d in acc.divisions] == ["drop"]


def test_hf_step_condition_and_division_in_the_backward() -> None:
    (acc,) = _accumulations(
        """
        for step, x in enumerate(loader):
            (model(x).sum() / args.n).backward()
            if step % args.n == 0 or step == len(loader) - 1:
                optimizer.step()
        """
    )
    assert acc.migratable and acc.steps == "args.n"
    assert [d.kind for d in acc.divisions] == ["left"]


def test_reasons_when_the_shape_is_different() -> None:
    counted, undivided, mismatched = _accumulations(
        """
        for x in loader:
            (model(x).sum() / 4).backward()
            step += 1
            if step % 4 == 0:
                optimizer.step()
        for i, x in enumerate(loader):
            model(x).sum().backward()
            if (i + 1) % 4 == 0:
                optimizer.step()
        for i, x in enumerate(loader):
            (model(x).sum() / 2).backward()
            if (i + 1) % 4 == 0:
                optimizer.step()
        """
    )
    assert "counts `step`" in counted.reason
    assert "not divided" in undivided.reason
    assert "divided by `2`" in mismatched.reason


def test_a_divided_loss_stepped_every_batch_is_not_accumulation() -> None:
    assert _accumulations("for x in loader:\n    (model(x).sum() / 2).backward()\n    optimizer.step()\n") == ()


def test_a_continue_guard_is_reported() -> None:
    (acc,) = _accumulations(
        """
        for i, x in enumerate(loader):
            (model(x).sum() / 2).backward()
            if (i + 1) % 2 != 0:
                continue
            optimizer.step()
        """
    )
    assert "continue" in acc.reason and acc.steps == "2"
