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
            hits += (preds == batch["y"]).sum().item() + (preds == batch["z"]).sum().item()
        """
    )
    assert "condition" in conditional.reason
    assert "batch[...]" in subscripted.reason  # two keys: which one is the reference?


def test_a_batch_dict_value_is_gathered_into_a_name_of_its_own() -> None:
    _, (gather,) = _gathers(
        """
        for batch in loader:
            preds = model(batch["x"]).argmax(-1)
            hits += (preds == batch["labels"]).sum().item()
        """
    )
    assert gather.reason is None
    assert gather.names == ("preds", "labels") and gather.values == ("preds", 'batch["labels"]')
    assert gather.renames == (('batch["labels"]', "labels"),)


def test_a_scalar_loss_is_reduced_not_gathered() -> None:
    _, (gather,) = _gathers(
        """
        criterion = torch.nn.CrossEntropyLoss(reduction="sum")
        for x, y in loader:
            out = model(x)
            loss = criterion(out, y)
            total += loss.item()
            hits += (out.argmax(1) == y).sum().item()
        """
    )
    assert gather.reason is None
    assert [(n, r) for n, r, _ in gather.reductions] == [("loss", "sum")]
    # the loss is computed from `out` after the gather: gathered into new names, so the
    # loss stays this process's (and is then summed once across processes)
    assert gather.names == ("all_out", "all_y") and gather.values == ("out", "y")


def test_names_the_loop_reuses_are_gathered_into_new_ones() -> None:
    _, (gather,) = _gathers(
        """
        for i, (x, _) in enumerate(loader):
            out = model(x)
            err += ((out - x) ** 2).sum().item()
            if i == 0:
                keep = out.view(4, 2)
        """
    )
    assert gather.reason is None
    assert gather.names == ("all_out", "all_x") and gather.values == ("out", "x")
    assert set(gather.renames) == {("out", "all_out"), ("x", "all_x")}


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


def test_values_of_unknown_shape_are_not_gathered_in_place_of_the_output() -> None:
    """imagenet's validate: `acc1, acc5 = accuracy(output, target)` are per-batch numbers
    from a function of the user's; the output is used again by the loss."""
    _, (gather,) = _gathers(
        """
        criterion = torch.nn.CrossEntropyLoss()
        for images, target in loader:
            output = model(images)
            loss = criterion(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            losses.update(loss.item(), images.size(0))
            top1.update(acc1[0], images.size(0))
        """
    )
    assert "is used again in the loop" in gather.reason


def test_numpy_values_are_never_gathered_and_the_metric_is_left_with_its_reason() -> None:
    """semseg's validation: `gt = labels.cpu().numpy()` is no tensor to gather (it was taken
    for a view of the batch: ValueError on 2 processes), and gathering the tensors it comes
    from needs one image size on every process, which the default config does not have
    (reader R2 ran it: a size mismatch in the all-gather). The metric is left, with why."""
    _, (gather,) = _gathers(
        """
        criterion = torch.nn.CrossEntropyLoss()
        for images, labels in loader:
            outputs = model(images)
            val_loss = criterion(outputs, labels)
            pred = outputs.max(1)[1].cpu().numpy()
            gt = labels.cpu().numpy()
            score.update(gt, pred)
        """
    )
    assert "NumPy values made in the loop (`gt`)" in gather.reason
    assert "accelerator.reduce" in gather.reason


def test_a_value_computed_before_the_last_root_is_bound_is_gathered_itself() -> None:
    """`pred` comes from the output before the labels are moved: gathering the output
    after the labels would leave `pred` with this process's rows, so `pred` is gathered."""
    analysis, (gather,) = _gathers(
        """
        correct = 0
        for images, labels in loader:
            outputs = model(images)
            pred = outputs.argmax(1)
            labels = labels.to(device)
            correct += (pred == labels).sum().item()
        """
    )
    assert gather.reason is None
    assert set(gather.names) == {"pred", "labels"}
    assert analysis.module.code_for_node(gather.after).strip() == "labels = labels.to(device)"


def test_a_model_output_made_numpy_where_it_is_computed_is_not_gathered() -> None:
    _, (gather,) = _gathers(
        """
        for images, labels in loader:
            pred = model(images).argmax(1).cpu().numpy()
            score.update(labels.numpy(), pred)
        """
    )
    assert "NumPy" in gather.reason
