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
