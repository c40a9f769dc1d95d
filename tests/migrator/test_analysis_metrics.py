"""analysis/metrics.py: what an evaluation loop must gather before counting."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrator.analysis import analyze

HEAD = """
import torch
model = torch.nn.Linear(2, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.zeros(8, 2))
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
"""


def _gathers(loop: str):
    module = cst.parse_module("from runtime import Accelerator\naccelerator = Accelerator()\n" + textwrap.dedent(HEAD) + textwrap.dedent(loop))
    analysis = analyze(MetadataWrapper(module, unsafe_skip_copy=True))
    return analysis, analysis.patterns.metrics


def test_roots_are_gathered_after_the_model_call() -> None:
    analysis, (gather,) = _gathers(
        """
        correct = 0
        for data, target in loader:
            output = model(data)
            loss_sum = 0
            pred = output.argmax(1)
            correct += (pred == target).sum().item()
        """
    )
    assert gather.reason is None
    assert gather.names == ("output", "target")  # pred is computed from output: not gathered
    assert analysis.module.code_for_node(gather.after).strip() == "output = model(data)"


def test_hf_add_batch_gathers_its_arguments() -> None:
    _, (gather,) = _gathers(
        """
        for batch in loader:
            predictions = model(**batch).logits.argmax(-1)
            metric.add_batch(predictions=predictions, references=batch["labels"])
        """
    )
    assert gather.names == () and [n for n, _ in gather.arg_gathers[0].args] == ["predictions", "references"]


def test_shapes_that_are_reported() -> None:
    _, (conditional, subscripted) = _gathers(
        """
        for x in loader:
            out = model(x)
            if out.sum() > 0:
                hits += out.argmax(1).sum().item()
        for batch in loader:
            preds = model(batch["x"]).argmax(-1)
            hits += (preds == batch["y"]).sum().item()
        """
    )
    assert "condition" in conditional.reason
    assert "batch[...]" in subscripted.reason


def test_loops_that_train_are_already_gathered_or_reduced_later_are_left_alone() -> None:
    _, gathers = _gathers(
        """
        for x in loader:
            accelerator.backward(model(x).sum())
            total += x.size(0)
        for x in loader:
            out = accelerator.gather_for_metrics(model(x))
            hits += out.argmax(1).sum()
        for x in loader:
            hits += model(x).argmax(1).sum()
        torch.distributed.all_reduce(hits)
        """
    )
    assert gathers == ()
