"""FSDP against DDP on 2 processes: `python bench/bench_fsdp.py`.

Prints, measured in this run, for one MLP trained with AdamW on 2 processes (gloo, CPU):
  * step time of the runtime under FSDP2 (`FullyShardedDataParallelPlugin`, each Linear its
    own shard unit; and again with reshard_after_forward=False) and under DDP, all loops in
    the same 2 processes (one Accelerator each), interleaved repeat by repeat in alternating
    order (median over repeats, and the ratio);
  * memory per rank, two ways:
      - tracked bytes: the parameter, gradient and optimizer-state elements this rank
        holds after a step (DTensor local shards under FSDP), times their element size:
        what sharding divides;
      - peak RSS growth: in a fresh 2-process launch per strategy, the process's peak
        resident memory (ru_maxrss) minus its resident memory just before the model was
        built; it also counts activations, the all-gathered parameters of the unit being
        computed, communication buffers and the allocator's slack.
This is a command, not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _mlp(width: int, depth: int):
    from torch import nn

    layers = [nn.Linear(64, width), nn.ReLU()]
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def _plugin(width: int, reshard_after_forward: bool = True):
    from runtime import FullyShardedDataParallelPlugin

    # Every width x width Linear its own unit.
    return FullyShardedDataParallelPlugin(min_num_params=width * width, reshard_after_forward=reshard_after_forward)


def _loop(acc, width: int, depth: int, batch_size: int):
    """A training step through `acc` (the optimizer built before prepare, as scripts do)."""
    import torch

    torch.manual_seed(0)
    model = _mlp(width, depth)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, opt = acc.prepare(model, opt)
    g = torch.Generator().manual_seed(acc.process_index)
    x, y = torch.randn(batch_size, 64, generator=g), torch.randint(0, 10, (batch_size,), generator=g)

    def step() -> None:
        acc.backward(torch.nn.functional.cross_entropy(model(x), y))
        acc.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=False)  # keep gradients allocated, so they are counted

    return step, model, opt


def _timed(step, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def _local_bytes(tensor) -> int:
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    return local.numel() * local.element_size()


def tracked_bytes(model, opt) -> dict[str, int]:
    """Bytes of parameters, gradients and optimizer state this process holds."""
    import torch

    params = [p for p in model.parameters()]
    state = [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor) and v.dim() > 0]
    return {
        "params": sum(_local_bytes(p) for p in params),
        "grads": sum(_local_bytes(p.grad) for p in params if p.grad is not None),
        "optimizer": sum(_local_bytes(v) for v in state),
    }


def timing_worker(args) -> None:
    """Both strategies in the same 2 processes: step times interleaved, and tracked bytes."""
    import torch

    from runtime import Accelerator

    ddp_acc = Accelerator(cpu=True)
    fsdp_acc = Accelerator(cpu=True, fsdp_plugin=_plugin(args.width))
    kept_acc = Accelerator(cpu=True, fsdp_plugin=_plugin(args.width, reshard_after_forward=False))
    loops = {
        "ddp": _loop(ddp_acc, args.width, args.depth, args.batch_size),
        "fsdp": _loop(fsdp_acc, args.width, args.depth, args.batch_size),
        "fsdp_kept": _loop(kept_acc, args.width, args.depth, args.batch_size),
    }
    for step, _, _ in loops.values():  # warm-up: first all-gathers, optimizer state, allocator
        _timed(step, 2)
    times: dict[str, list[float]] = {name: [] for name in loops}
    for repeat in range(args.repeats):
        order = list(loops) if repeat % 2 == 0 else list(loops)[::-1]  # no loop always goes first
        for name in order:
            ddp_acc.wait_for_everyone()
            times[name].append(_timed(loops[name][0], args.steps))
    tracked = {name: tracked_bytes(model, opt) for name, (_, model, opt) in loops.items()}
    per_rank = [None] * ddp_acc.num_processes
    torch.distributed.all_gather_object(per_rank, tracked)
    if ddp_acc.is_main_process:
        Path(args.out).write_text(json.dumps({"times": times, "tracked": per_rank, "strategy": fsdp_acc.distributed_type.value}))
    for acc in (kept_acc, fsdp_acc, ddp_acc):
        acc.end_training()


def memory_worker(args) -> None:
    """One strategy in fresh processes: peak RSS growth from just before the model is built."""
    import torch

    from runtime import Accelerator

    acc = Accelerator(cpu=True, fsdp_plugin=_plugin(args.width) if args.strategy == "fsdp" else None)
    if args.strategy == "fsdp":
        import runtime.fsdp  # noqa: F401  (imported already: keep its import out of the growth)
    baseline = _rss_kib()
    step, _, _ = _loop(acc, args.width, args.depth, args.batch_size)
    _timed(step, args.steps)
    growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - baseline
    per_rank = [None] * acc.num_processes
    torch.distributed.all_gather_object(per_rank, growth)
    if acc.is_main_process:
        Path(args.out).write_text(json.dumps(per_rank))
    acc.end_training()


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


def _launch(args, *worker_args: str) -> object:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
        command = [sys.executable, "-m", "runtime.launch", "--nproc-per-node", "2", "--cpu", __file__]
        command += [*worker_args, "--out", out, "--width", str(args.width), "--depth", str(args.depth)]
        command += ["--batch-size", str(args.batch_size), "--repeats", str(args.repeats), "--steps", str(args.steps)]
        subprocess.run(command, env=env, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        return json.loads(Path(out).read_text())


def _mib(n: float) -> str:
    return f"{n / 2**20:8.1f} MiB"


def report(args, timing: dict, peaks: dict[str, list[int]]) -> None:
    params = sum(p.numel() for p in _mlp(args.width, args.depth).parameters())
    times = timing["times"]
    ddp, fsdp = statistics.median(times["ddp"]), statistics.median(times["fsdp"])
    print(
        f"MLP 64-{args.width}x{args.depth}-10 ({params / 1e6:.2f} M parameters), AdamW, clip, batch {args.batch_size}/process,"
    )
    print(f"2 processes (gloo, CPU); step time median of {args.repeats} repeats x {args.steps} steps, interleaved:")
    print(f"  DDP        {ddp * 1e3:8.2f} ms/step")
    print(f"  FSDP2      {fsdp * 1e3:8.2f} ms/step   (distributed_type {timing['strategy']})")
    ratios = [f / d for f, d in zip(times["fsdp"], times["ddp"])]
    print(f"  FSDP/DDP   {fsdp / ddp:8.3f}        (median of per-repeat ratios {statistics.median(ratios):.3f})")
    kept = statistics.median(times["fsdp_kept"])
    print(f"  FSDP2, reshard_after_forward=False {kept * 1e3:8.2f} ms/step, /DDP {kept / ddp:.3f}")
    print("tracked bytes per rank (parameters + gradients + optimizer state held by the rank):")
    for rank, row in enumerate(timing["tracked"]):
        ddp_total, fsdp_total = sum(row["ddp"].values()), sum(row["fsdp"].values())
        print(
            f"  rank {rank}: DDP {_mib(ddp_total)}  FSDP2 {_mib(fsdp_total)}  FSDP/DDP {fsdp_total / ddp_total:.3f}"
            f"  (FSDP params {_mib(row['fsdp']['params']).strip()}, grads {_mib(row['fsdp']['grads']).strip()},"
            f" optimizer {_mib(row['fsdp']['optimizer']).strip()})"
        )
    print("peak RSS growth per rank (fresh launch per strategy; ru_maxrss minus RSS before the model):")
    for rank, (d, f) in enumerate(zip(peaks["ddp"], peaks["fsdp"])):
        print(f"  rank {rank}: DDP {_mib(d * 1024)}  FSDP2 {_mib(f * 1024)}  FSDP/DDP {f / d:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--depth", type=int, default=4, help="width x width layers")
    parser.add_argument("--batch-size", type=int, default=32, help="per process")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5, help="steps per timed repeat")
    parser.add_argument("--worker", choices=["timing", "memory"], help=argparse.SUPPRESS)
    parser.add_argument("--strategy", choices=["ddp", "fsdp"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "timing":
        timing_worker(args)
        return
    if args.worker == "memory":
        memory_worker(args)
        return
    timing = _launch(args, "--worker", "timing")
    peaks = {name: _launch(args, "--worker", "memory", "--strategy", name) for name in ("ddp", "fsdp")}
    report(args, timing, peaks)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
