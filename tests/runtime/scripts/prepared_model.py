"""The prepared model answers for the user's module, trains in sync, and save_model writes once.

Each rank reads a different shard of the data, so equal gradients on every rank show DDP
still averages them; the user's own method, attribute and submodule are reached through the
prepared model; every rank calls save_model on a folder of its own, and only rank 0's exists.
"""

import argparse
import os

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

from runtime import Accelerator, set_seed


class Recurrent(nn.Module):
    def __init__(self, width: int = 6) -> None:
        super().__init__()
        self.config = {"width": width}
        self.body = nn.Linear(4, width)
        self.head = nn.Linear(width, 1)

    def init_hidden(self, batch: int) -> torch.Tensor:
        return torch.zeros(batch, self.config["width"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    acc = Accelerator()
    set_seed(0)
    g = torch.Generator().manual_seed(1)
    loader = DataLoader(TensorDataset(torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)), batch_size=4)
    model = Recurrent()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt, loader = acc.prepare(model, opt, loader)
    own = acc.unwrap_model(model)
    checks = {
        "is_ddp": isinstance(model, DistributedDataParallel),
        "config": model.config == {"width": 6},
        "head_is_users": model.head is own.head,
        "method": tuple(model.init_hidden(3).shape) == (3, 6),
        "state_dict_prefixed": all(key.startswith("module.") for key in model.state_dict()),
    }
    try:
        model.no_such_thing
        checks["missing_raises"] = False
    except AttributeError as error:
        checks["missing_raises"] = "no_such_thing" in str(error)
    grads_equal = []
    for x, y in loader:
        acc.backward(nn.functional.mse_loss(model(x), y))
        for p in model.parameters():
            grads = acc.gather(p.grad.detach()[None])
            grads_equal.append(bool(torch.allclose(grads[0], grads[1])))
        opt.step()
        opt.zero_grad()
    checks["grads_equal"] = all(grads_equal) and len(grads_equal) > 0
    acc.save_model(model, os.path.join(args.out, f"saved_by_rank{acc.process_index}"), max_shard_size=100)
    if acc.is_main_process:
        torch.save({"checks": checks, "state": own.state_dict()}, os.path.join(args.out, "result.pt"))
    assert all(checks.values()), f"rank {acc.process_index}: {checks}"
    acc.end_training()


if __name__ == "__main__":
    main()
