"""A small single-GPU training script: the example accel-migrate's Quickstart migrates.

Synthetic regression data made here, a tiny MLP, a DataLoader, AdamW, a cosine
learning-rate schedule and gradient clipping. Runs on CPU in a couple of seconds:

    python examples/train.py
    accel-migrate examples/train.py --diff
"""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    def __init__(self, features: int, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)


def make_data(samples: int, features: int, seed: int = 0) -> TensorDataset:
    """y = x @ w + noise, with a fixed w: a problem a small MLP learns in seconds."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, features, generator=generator)
    w = torch.randn(features, 1, generator=generator)
    y = x @ w + 0.1 * torch.randn(samples, 1, generator=generator)
    return TensorDataset(x, y)


def main():
    parser = argparse.ArgumentParser(description="Train a small MLP on synthetic data.")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_loader = DataLoader(make_data(2048, 16), batch_size=args.batch_size, shuffle=True)
    model = MLP(16).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * len(train_loader))
    loss_fn = nn.MSELoss()

    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            scheduler.step()
            total += loss.item()
        print(f"epoch {epoch}: mean loss {total / len(train_loader):.4f}")


if __name__ == "__main__":
    main()
