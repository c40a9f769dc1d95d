"""A model whose buffer is a transposed view (the positional encoding of PyTorch's
Transformer example: `pe.unsqueeze(0).transpose(0, 1)`), trained for 3 steps on every
process. DDP broadcasts buffers at each forward; rank 0 writes `result.pt`."""

import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from runtime import Accelerator, set_seed


class WithPositions(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        positions = torch.arange(40, dtype=torch.float32).reshape(10, 4) / 40
        self.register_buffer("pe", positions.unsqueeze(0).transpose(0, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x) + self.pe[: x.size(0)].squeeze(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    acc = Accelerator()
    set_seed(0)
    g = torch.Generator().manual_seed(1)
    loader = DataLoader(TensorDataset(torch.randn(24, 4, generator=g), torch.randn(24, 4, generator=g)), batch_size=4)
    model = WithPositions()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt, loader = acc.prepare(model, opt, loader)
    steps = 0
    for x, y in loader:
        acc.backward(nn.functional.mse_loss(model(x), y))
        opt.step()
        opt.zero_grad()
        steps += 1
    if acc.is_main_process:
        pe = acc.unwrap_model(model).pe
        torch.save({"steps": steps, "pe": pe.clone()}, os.path.join(args.out, "result.pt"))
    acc.end_training()


if __name__ == "__main__":
    main()
