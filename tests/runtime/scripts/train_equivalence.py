"""Training equivalence, gradient accumulation, scheduler convention and bf16, in one script.

Run with plain `python` (1 process, batch 2B) or under accel-launch (N processes, batch B
each, N*B == 2B). Rank 0 writes what it measured to OUT/result.pt; the test compares runs.
Checks that need both ranks at once (gradient sync) are asserted here, with messages.
"""

import argparse
import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from runtime import Accelerator, set_seed

SAMPLES, FEATURES = 64, 4
GLOBAL_BATCH = 8


def make_data() -> TensorDataset:
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    y = x @ torch.randn(FEATURES, 1, generator=g) + 0.1 * torch.randn(SAMPLES, 1, generator=g)
    return TensorDataset(x, y)


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, 8), nn.Tanh(), nn.Linear(8, 1))


def train_plain(acc: Accelerator, epochs: int) -> dict:
    """Phase 1: N processes at GLOBAL_BATCH/N each must equal one process at GLOBAL_BATCH."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(make_data(), batch_size=GLOBAL_BATCH // acc.num_processes)
    model, opt, loader = acc.prepare(model, opt, loader)
    for _ in range(epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
    return {k: v.detach().cpu().clone() for k, v in acc.unwrap_model(model).state_dict().items()}


def train_accumulating(acc: Accelerator, epochs: int, steps: int) -> dict:
    """Phase 2: micro batches with accumulation must equal one process at GLOBAL_BATCH."""
    acc.gradient_accumulation_steps = steps
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(make_data(), batch_size=GLOBAL_BATCH // (acc.num_processes * steps))
    model, opt, loader = acc.prepare(model, opt, loader)
    for _ in range(epochs):
        for x, y in loader:
            with acc.accumulate(model):
                loss = nn.functional.mse_loss(model(x), y)
                acc.backward(loss)
                check_grad_sync(acc, model)
                opt.step()
                opt.zero_grad()
    acc.gradient_accumulation_steps = 1
    return {k: v.detach().cpu().clone() for k, v in acc.unwrap_model(model).state_dict().items()}


def check_grad_sync(acc: Accelerator, model: nn.Module) -> None:
    if acc.num_processes == 1:
        return
    flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    rows = acc.gather(flat[None])
    same = torch.allclose(rows[0], rows[1], atol=1e-7)
    if acc.sync_gradients:
        assert same, "gradients differ between processes on the last micro step (they must be synchronised)"
    else:
        assert not same, "gradients were synchronised on an accumulation micro step (must stay local)"


def scheduler_record(acc: Accelerator, epochs: int) -> list:
    """Phase 3: LR against samples consumed, for the three scheduler cases of the convention."""
    params = [nn.Parameter(torch.zeros(1)) for _ in range(3)]
    opts = [torch.optim.SGD([p], lr=1.0) for p in params]
    prepared_sched = torch.optim.lr_scheduler.LambdaLR(opts[0], lambda step: 0.95**step)
    loader = DataLoader(make_data(), batch_size=4, shuffle=True)
    *opts, loader, prepared_sched = acc.prepare(*opts, loader, prepared_sched)
    total = epochs * len(loader)  # sized from the prepared length: built after prepare, not prepared
    sized_sched = torch.optim.lr_scheduler.LambdaLR(opts[1], lambda step: 1 - step / total)
    epoch_sched = torch.optim.lr_scheduler.StepLR(opts[2], step_size=1, gamma=0.5)
    record, steps = [], 0
    for _ in range(epochs):
        for _batch in loader:
            for opt in opts:
                opt.step()
            prepared_sched.step()
            sized_sched.step()
            steps += 1
            samples = steps * loader.total_batch_size
            record.append([samples] + [opt.param_groups[0]["lr"] for opt in opts])
        epoch_sched.step()
    return record


def check_bf16(acc: Accelerator) -> dict:
    """bf16 autocast on this device: the prepared forward computes in bf16 and returns float32."""
    bf16 = Accelerator(mixed_precision="bf16")
    model = nn.Sequential(nn.Linear(FEATURES, 2))
    seen = []
    model[0].register_forward_hook(lambda mod, inp, out: seen.append(out.dtype))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = bf16.prepare(model, opt)
    out = model(torch.randn(3, FEATURES, device=bf16.device))
    bf16.backward(out.sum())
    opt.step()
    with bf16.autocast():
        inside = (torch.randn(2, 2, device=bf16.device) @ torch.randn(2, 2, device=bf16.device)).dtype
    return {"inner": str(seen[0]), "output": str(out.dtype), "autocast": str(inside), "name": bf16.mixed_precision}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--accumulate", type=int, default=2)
    args = parser.parse_args()
    acc = Accelerator()
    set_seed(7)
    result = {
        "num_processes": acc.num_processes,
        "distributed_type": acc.distributed_type.value,
        "plain": train_plain(acc, args.epochs),
        "accumulated": train_accumulating(acc, args.epochs, args.accumulate),
        "schedules": scheduler_record(acc, args.epochs),
    }
    if acc.num_processes == 1:
        result["bf16"] = check_bf16(acc)
    if acc.is_main_process:
        os.makedirs(args.out, exist_ok=True)
        torch.save(result, os.path.join(args.out, "result.pt"))
    acc.end_training()
    print(f"rank {acc.process_index} done", file=sys.stderr)


if __name__ == "__main__":
    main()
