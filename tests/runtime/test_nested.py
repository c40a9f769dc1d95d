"""runtime/nested.py: tensors found and rebuilt inside every container a batch may use."""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field

import torch

from runtime.nested import map_tensors, send_to_device

Pair = namedtuple("Pair", "x y")


@dataclass(frozen=True)
class Batch:
    images: torch.Tensor
    labels: list
    name: str = "b"
    derived: int = field(init=False, default=0)


def test_containers_keep_their_types_and_other_values():
    data = {"a": [torch.ones(1), (torch.ones(2), "keep")], "p": Pair(torch.ones(1), 3), "d": Batch(torch.ones(1), [torch.ones(1)])}
    doubled = map_tensors(lambda t: t * 2, data)
    assert doubled["a"][0].item() == 2 and doubled["a"][1][1] == "keep" and isinstance(doubled["a"][1], tuple)
    assert isinstance(doubled["p"], Pair) and doubled["p"].x.item() == 2 and doubled["p"].y == 3
    assert isinstance(doubled["d"], Batch) and doubled["d"].images.item() == 2 and doubled["d"].labels[0].item() == 2
    assert data["a"][0].item() == 1, "the input is not modified"



def test_send_to_device_moves_every_tensor():
    moved = send_to_device({"x": [torch.ones(1, dtype=torch.float64)]}, torch.device("cpu"))
    assert moved["x"][0].device.type == "cpu" and moved["x"][0].dtype is torch.float64
