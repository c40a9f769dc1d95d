"""prepare() moves a resumed optimizer's state to the process's device, as Accelerate
does, and leaves Adam's `step` counter where torch keeps it (on the CPU)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from runtime.accelerator import _place_state  # noqa: E402


def test_moments_move_and_the_step_counter_stays():
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    target = torch.device("meta")  # a device other than the state's, available without a GPU
    _place_state(optimizer, target)
    for state in optimizer.state.values():
        assert state["exp_avg"].device == target
        assert state["exp_avg_sq"].device == target
        assert state["step"].device == torch.device("cpu")


def test_state_already_on_the_device_is_left_as_it_is():
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    before = {id(v) for s in optimizer.state.values() for v in s.values()}
    _place_state(optimizer, torch.device("cpu"))
    assert {id(v) for s in optimizer.state.values() for v in s.values()} == before
