"""analysis/unreached.py: functions that train or evaluate what a caller elsewhere set up."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrator.analysis import analyze
from migrator.analysis.unreached import in_unreached_function, unreached_functions


def _analysis(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    return analyze(MetadataWrapper(module, unsafe_skip_copy=True))


def test_an_engine_module_names_each_call_and_what_the_caller_prepares() -> None:
    analysis = _analysis(
        """
        import torch

        def train_fn(data_loader, model, optimizer, device):
            for x, y in data_loader:
                loss = model(x.to(device), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()

        def eval_fn(data_loader, model):
            outs = []
            for x, y in data_loader:
                outs.extend(model(x).cpu().numpy().tolist())
            return outs

        def loss_fn(a, b):
            return (a - b).abs().mean()
        """
    )
    found = {u.name: u for u in unreached_functions(analysis)}
    assert sorted(found) == ["eval_fn", "train_fn"]
    assert found["train_fn"].inputs == ("data_loader", "model", "optimizer")
    assert [n.what for n in found["train_fn"].needs] == ["calls `loss.backward()`", "clips with `clip_grad_norm_`"]
    assert "gather_for_metrics" in found["eval_fn"].needs[0].instead
    backward = next(n.node for n in found["train_fn"].needs)
    assert in_unreached_function(analysis, backward)


def test_nothing_where_the_file_sets_up_training_or_nothing_comes_from_a_caller() -> None:
    migrating = _analysis(
        """
        import torch

        def train(loader, model, optimizer):
            for x in loader:
                model(x).sum().backward()
                optimizer.step()

        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(torch.zeros(4, 2))
        train(loader, model, optimizer)
        """
    )
    assert unreached_functions(migrating) == ()  # AM301 and AM002 migrate these
    globals_only = _analysis(
        """
        from setup import model, opt

        def step(x):
            model(x).sum().backward()
            opt.step()
        """
    )
    assert unreached_functions(globals_only) == ()  # no parameter: the set-up is not the caller's


def test_methods_and_optimizers_named_or_annotated_come_from_the_caller() -> None:
    """Swin's loss scaler gets `optimizer` and scales the loss; guided-diffusion's trainer
    stores the model it is given and runs the backward in a method."""
    analysis = _analysis(
        """
        import torch

        class Scaler:
            def __call__(self, loss, optimizer, parameters):
                self._scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(parameters, 1.0)

        class Trainer:
            def __init__(self, *, model, lr):
                self.model = model

            def backward(self, loss):
                (loss * 8.0).backward()
        """
    )
    found = {u.name: u for u in unreached_functions(analysis)}
    assert found["Scaler.__call__"].inputs == ("optimizer",)
    assert found["Scaler.__call__"].needs[0].instead == "`accelerator.backward(loss)`"
    assert found["Trainer.backward"].inputs == ("self.model",)
    assert found["Trainer.backward"].needs[0].what == "calls `(loss * 8.0).backward()`"
    assert found["Trainer.backward"].needs[0].instead == "`accelerator.backward(loss * 8.0)`"
