"""Fully sharded training (FSDP2) on N processes; rank 0 writes what it measured to OUT/result.pt.

`--plugin classes` passes FullyShardedDataParallelPlugin(transformer_cls_names_to_wrap=["Block"]);
`--plugin env` passes nothing, so the settings come from the ACCEL_FSDP_* variables the test
sets (what `accel-launch --fsdp` does). The test compares the results with raw torch in one
process at the global batch (make_model, make_data and the constants are shared with it).
"""

import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from runtime import Accelerator, FullyShardedDataParallelPlugin

FEATURES, WIDTH = 6, 32
SAMPLES, GLOBAL_BATCH, EPOCHS = 48, 8, 2
LR, WEIGHT_DECAY, MAX_NORM = 0.01, 0.01, 0.5
ACCUMULATE = 2


class Block(nn.Module):
    """A residual layer: the shard unit chosen by class name."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        return x + torch.tanh(self.linear(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(FEATURES, WIDTH)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(WIDTH, 1)

    def forward(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return Net()


def make_data() -> TensorDataset:
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    y = x @ torch.randn(FEATURES, 1, generator=g) + 0.1 * torch.randn(SAMPLES, 1, generator=g)
    return TensorDataset(x, y)


def make_optimizer(params) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=LR, weight_decay=WEIGHT_DECAY)


def train(acc: Accelerator) -> dict:
    """The optimizer is built before prepare (as most scripts do) and re-pointed by prepare."""
    model = make_model()
    opt = make_optimizer(model.parameters())
    loader = DataLoader(make_data(), batch_size=GLOBAL_BATCH // acc.num_processes)
    model, opt, loader = acc.prepare(model, opt, loader)
    norms = []
    for _ in range(EPOCHS):
        for x, y in loader:
            acc.backward(nn.functional.mse_loss(model(x), y))
            norms.append(acc.clip_grad_norm_(model.parameters(), MAX_NORM).item())
            opt.step()
            opt.zero_grad()
    local = sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel() for p in model.parameters())
    total = sum(p.numel() for p in model.parameters())
    units = sum(1 for m in acc.unwrap_model(model).modules() if type(m).__name__.startswith("FSDP"))
    return {
        "state": acc.get_state_dict(model),
        "norms": norms,
        "local_numel": acc.gather(torch.tensor([local])).tolist(),
        "total_numel": total,
        "shard_units": units,
        "unwrapped_is_users_class": isinstance(acc.unwrap_model(model), Net),
        "metrics": gathered_predictions(acc, model),
    }


def train_accumulating(acc: Accelerator) -> dict:
    """Model prepared alone, optimizer built over its sharded parameters afterwards; micro steps."""
    acc.gradient_accumulation_steps = ACCUMULATE
    model = acc.prepare(make_model())
    opt = make_optimizer(model.parameters())
    loader = DataLoader(make_data(), batch_size=GLOBAL_BATCH // (acc.num_processes * ACCUMULATE))
    opt, loader = acc.prepare(opt, loader)
    syncs = []
    for _ in range(EPOCHS):
        for x, y in loader:
            with acc.accumulate(model):
                acc.backward(nn.functional.mse_loss(model(x), y))
                syncs.append(acc.sync_gradients)
                if acc.sync_gradients:
                    acc.clip_grad_norm_(model.parameters(), MAX_NORM)
                opt.step()
                opt.zero_grad()
    acc.gradient_accumulation_steps = 1
    return {"state": acc.get_state_dict(model), "syncs": syncs}


def gathered_predictions(acc: Accelerator, model: nn.Module) -> int:
    """gather_for_metrics over an uneven evaluation set: every sample exactly once."""
    data = TensorDataset(torch.randn(10, FEATURES), torch.zeros(10, 1))
    loader = acc.prepare(DataLoader(data, batch_size=4))
    seen = 0
    with torch.no_grad():
        for x, _ in loader:
            seen += acc.gather_for_metrics(model(x)).shape[0]
    return seen


def wrong_order(acc: Accelerator) -> str:
    """The optimizer prepared in an earlier call than its model: a clear error, not silent no-training."""
    model = make_model()
    acc.prepare(make_optimizer(model.parameters()))
    try:
        acc.prepare(model)
    except RuntimeError as error:
        return str(error)
    return ""


def bf16_policy() -> dict:
    """FSDP's bf16 MixedPrecisionPolicy: layers compute in bf16, the model returns float32 (so a
    loss against float32 targets works), and the kept shards stay float32."""
    acc = Accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(min_num_params=500, mixed_precision_policy="bf16"))
    model = make_model()
    seen = []
    model.head.register_forward_hook(lambda module, inputs, output: seen.append(str(output.dtype)))
    opt = make_optimizer(model.parameters())
    model, opt = acc.prepare(model, opt)
    x, y = make_data()[:4]
    out = model(x)
    acc.backward(nn.functional.mse_loss(out, y))
    opt.step()
    return {"inner": seen[0], "output": str(out.dtype), "shards": sorted({str(p.dtype) for p in model.parameters()})}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--plugin", choices=["classes", "env"], required=True)
    args = parser.parse_args()
    plugin = FullyShardedDataParallelPlugin(transformer_cls_names_to_wrap=["Block"]) if args.plugin == "classes" else None
    acc = Accelerator(fsdp_plugin=plugin)
    result = {"distributed_type": acc.distributed_type.value, "num_processes": acc.num_processes}
    result["plain"] = train(acc)
    if args.plugin == "classes":
        result["accumulated"] = train_accumulating(acc)
        result["wrong_order"] = wrong_order(acc)
        result["bf16_policy"] = bf16_policy()
    if acc.is_main_process:
        torch.save(result, os.path.join(args.out, "result.pt"))
    acc.end_training()


if __name__ == "__main__":
    main()
