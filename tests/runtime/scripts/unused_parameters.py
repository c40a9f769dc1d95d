"""A model with a submodule the loss never reads, trained for 3 steps on every process.

With `--find-unused` the Accelerator gets
`kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)]` and trains;
without it DDP stops at the second step, waiting for the unused submodule's gradients.
Rank 0 writes `result.pt` with the options the wrap got and the trained weights.
"""

import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from runtime import Accelerator, DistributedDataParallelKwargs, set_seed


class WithSpareHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)
        self.spare = nn.Linear(8, 3)  # built, never part of the output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--find-unused", action="store_true")
    args = parser.parse_args()
    handlers = [DistributedDataParallelKwargs(find_unused_parameters=True)] if args.find_unused else []
    acc = Accelerator(kwargs_handlers=handlers)
    set_seed(0)
    g = torch.Generator().manual_seed(1)
    loader = DataLoader(TensorDataset(torch.randn(24, 4, generator=g), torch.randn(24, 1, generator=g)), batch_size=4)
    model = WithSpareHead()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt, loader = acc.prepare(model, opt, loader)
    steps = 0
    for x, y in loader:
        acc.backward(nn.functional.mse_loss(model(x), y))
        opt.step()
        opt.zero_grad()
        steps += 1
        acc.print(f"step {steps} done")
    if acc.is_main_process:
        result = {"steps": steps, "find_unused": model.find_unused_parameters, "state": acc.unwrap_model(model).state_dict()}
        torch.save(result, os.path.join(args.out, "result.pt"))
    acc.end_training()


if __name__ == "__main__":
    main()
