"""Shared pieces of the integration tests: the scripts as modules, and a raw-torch reference."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from tests.runtime.integration.harness import SCRIPTS


def load_script(name: str) -> ModuleType:
    """Import a test script as a module, to reuse its data and model builders."""
    spec = importlib.util.spec_from_file_location(f"_script_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def reference_params() -> dict:
    """train_equivalence's model trained by hand, in one process at the global batch: no runtime."""
    import torch
    from torch.utils.data import DataLoader

    script = load_script("train_equivalence")
    model = script.make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        for x, y in DataLoader(script.make_data(), batch_size=script.GLOBAL_BATCH):
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_params_close(actual: dict, expected: dict, what: str, atol: float = 1e-5) -> None:
    import torch

    assert actual.keys() == expected.keys(), f"{what}: different parameter names"
    for name in expected:
        diff = (actual[name] - expected[name]).abs().max().item()
        assert torch.allclose(actual[name], expected[name], atol=atol), f"{what}: {name} differs by {diff:.2e}"
