"""FSDP2 on a CUDA GPU (NCCL), for a machine that has one: `accel-launch --nproc-per-node 1 fsdp_gpu_check.py`.

Not run by the suite (CI has no GPU). Checks, on the GPU, that fully sharded training
matches raw torch in fp32, and that bf16 autocast, FSDP's bf16 MixedPrecisionPolicy, fp16
with the GradScaler, and CPU offload of parameters train (finite, decreasing loss); prints
one line per case with the step time, and exits non-zero when a check fails.
"""

import time

import torch
from torch import nn

from runtime import Accelerator, FullyShardedDataParallelPlugin

STEPS = 20


def make_model() -> nn.Module:
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [nn.Linear(1024, 1024), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(1024, 1))


def data(device) -> tuple:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 1024, generator=g)
    return x.to(device), (x[:, :1] * 0.5).to(device)


def train(acc: Accelerator) -> tuple[list[float], float, nn.Module]:
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model, opt = acc.prepare(model, opt)
    x, y = data(acc.device)
    losses = []
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(STEPS):
        loss = nn.functional.mse_loss(model(x), y)
        acc.backward(loss)
        acc.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    torch.cuda.synchronize()
    return losses, (time.perf_counter() - start) / STEPS, model


def reference(device) -> dict:
    model = make_model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = data(device)
    for _ in range(STEPS):
        nn.functional.mse_loss(model(x), y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def main() -> None:
    layer = 1024 * 1024
    cases = {
        "fp32": dict(fsdp_plugin=FullyShardedDataParallelPlugin(min_num_params=layer)),
        "bf16 autocast": dict(mixed_precision="bf16", fsdp_plugin=FullyShardedDataParallelPlugin(min_num_params=layer)),
        "bf16 policy": dict(fsdp_plugin=FullyShardedDataParallelPlugin(min_num_params=layer, mixed_precision_policy="bf16")),
        "fp16 + GradScaler": dict(mixed_precision="fp16", fsdp_plugin=FullyShardedDataParallelPlugin(min_num_params=layer)),
        "cpu offload": dict(fsdp_plugin=FullyShardedDataParallelPlugin(min_num_params=layer, cpu_offload=True)),
    }
    failures = []
    for name, kwargs in cases.items():
        try:
            acc = Accelerator(**kwargs)
            losses, step_s, model = train(acc)
            state = acc.get_state_dict(model)
            ok = all(map(torch.isfinite, map(torch.tensor, losses))) and losses[-1] < losses[0]
            shards_on = next(model.parameters()).device.type
            ok = ok and shards_on == ("cpu" if name == "cpu offload" else "cuda")
            line = (
                f"{name:<18} {acc.device} {acc.distributed_type.value} {step_s * 1e3:7.2f} ms/step"
                f"  loss {losses[0]:.4f} -> {losses[-1]:.4f}  shards on {shards_on}"
            )
            if name == "fp32" and acc.is_main_process:
                expected = reference(acc.device)
                diff = max((state[k] - expected[k]).abs().max().item() for k in expected)
                line += f"  max |FSDP - raw torch| {diff:.2e}"
                ok = ok and diff < 1e-5
            print(("ok   " if ok else "FAIL ") + line, flush=True)
            if not ok:
                failures.append(name)
        except Exception as error:  # report every case, then fail
            print(f"FAIL {name:<18} {type(error).__name__}: {error}", flush=True)
            failures.append(name)
    if failures:
        raise SystemExit(f"failed: {', '.join(failures)}")


if __name__ == "__main__":
    main()
