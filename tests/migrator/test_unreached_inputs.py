"""AM913 names what the caller prepares: never a GradScaler, which prepare() does not take."""

from __future__ import annotations

from migrator.api import migrate_source
from migrator.config import Config

ENGINE = '''\
import torch


def train_one_epoch(model, optimizer, loader, scaler):
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
'''


def test_a_grad_scaler_parameter_is_not_among_what_the_caller_prepares() -> None:
    """WZMIAOMIAO's DeepLabV3 engine: `scaler.step(optimizer)` steps like an optimizer,
    but prepare() raises on a GradScaler (reader R2, seventeenth session)."""
    findings = [f for f in migrate_source(ENGINE, "engine.py", Config()).findings if f.code == "AM913"]
    assert findings, "no AM913"
    message = findings[0].message
    assert "the caller that prepares `model`, `optimizer`, `loader`" in message, message
    assert "`scaler`" not in message.split("prepares")[1]


KEPT_LOSS = '''\
class Stepper:
    def __init__(self, loss=None):
        self.loss = loss

    def train_batch(self, model, optimizer, inputs, targets):
        loss = self.loss
        loss.add(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
'''


def test_a_loss_object_the_class_keeps_is_not_what_accelerator_backward_takes() -> None:
    """pytorch-seq2seq's `loss = self.loss; loss.backward()`: the object's own backward
    differentiates the tensor it holds (reader R7, 28th session)."""
    findings = [f for f in migrate_source(KEPT_LOSS, "engine.py", Config()).findings if f.code == "AM913"]
    assert findings, "no AM913"
    message = findings[0].message
    assert "`accelerator.backward(loss)`" not in message, message
    assert "`loss` is `self.loss`, an object the class keeps from `__init__`" in message, message


def test_a_loss_tensor_a_method_stores_is_still_a_tensor() -> None:
    """`self.loss_G = ...` set in a method other than `__init__` holds a tensor."""
    source = KEPT_LOSS.replace("        loss = self.loss\n", "        self.loss = model(inputs).sum()\n        loss = self.loss\n")
    findings = [f for f in migrate_source(source, "engine.py", Config()).findings if f.code == "AM913"]
    assert findings and "`accelerator.backward(loss)`" in findings[0].message, [f.message for f in findings]


MAKES_ITS_OWN = '''\
import torch
from .optim import Clipped

class Fitter:
    def __init__(self, checkpoints):
        self.checkpoints = checkpoints
        self.optimizer = None

    def _step(self, model, inputs, targets):
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        model.zero_grad()
        loss.backward()
        self.optimizer.step()

    def fit(self, model, loader, resume=False, optimizer=None):
        if resume:
            state = self.checkpoints.latest()
            model = state.model
        if optimizer is None:
            optimizer = Clipped(torch.optim.Adam(model.parameters()), max_norm=5)
        self.optimizer = optimizer
        for inputs, targets in loader:
            self._step(model, inputs, targets)
        return model
'''


def test_a_class_that_makes_or_replaces_what_it_trains_is_where_the_prepare_goes() -> None:
    """pytorch-seq2seq's `SupervisedTrainer.train` builds the optimizer when none is given
    and swaps in a resumed model: a caller's prepare would be replaced (reader R1, 29th session)."""
    findings = [f for f in migrate_source(MAKES_ITS_OWN, "engine.py", Config()).findings if f.code == "AM913"]
    assert findings, "no AM913"
    message = findings[0].message
    assert "whose `fit` makes or replaces what it trains (`model` L18, `optimizer` L20, `self.optimizer` L21)" in message, message
    assert "the caller that prepares" not in message, message


def test_a_class_that_only_keeps_what_it_is_given_points_at_the_caller() -> None:
    source = MAKES_ITS_OWN.replace(
        "        if resume:\n            state = self.checkpoints.latest()\n            model = state.model\n"
        "        if optimizer is None:\n            optimizer = Clipped(torch.optim.Adam(model.parameters()), max_norm=5)\n", "",
    )
    findings = [f for f in migrate_source(source, "engine.py", Config()).findings if f.code == "AM913"]
    assert findings and "the caller that prepares" in findings[0].message, [f.message for f in findings]
