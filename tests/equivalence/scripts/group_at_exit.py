"""Trains a few DDP steps and ends WITHOUT end_training(), as most migrated scripts do;
reports at interpreter exit whether the process group is still alive."""

import atexit

import torch
import torch.distributed as dist

from runtime import Accelerator

accelerator = Accelerator()
atexit.register(lambda: print(f"rank {accelerator.process_index} group alive at exit: {dist.is_initialized()}", flush=True))
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = accelerator.prepare(model, optimizer)
for _ in range(3):
    accelerator.backward(model(torch.randn(8, 4)).square().mean())
    optimizer.step()
    optimizer.zero_grad()
