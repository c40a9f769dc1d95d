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
