"""Benchmark of the runtime's overhead: `python bench/bench_runtime.py`.

Prints, measured in this run:
  * the steady-state step time of a small MLP trained on 2 processes (gloo, CPU) through
    runtime's Accelerator, against the same loop written by hand with raw torch DDP and a
    DistributedSampler; both loops run in the same 2 processes, interleaved repeat by
    repeat in alternating order, so machine load affects both alike (median over
    repeats, and their ratio);
  * the same comparison in one process without communication, with a tiny model, which
    isolates the runtime's own per-step cost (wrappers, device moves, bookkeeping);
  * the time `from runtime import Accelerator, set_seed` adds to `import torch`, measured
    in fresh interpreters (median of several).
This is a command, not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMPORT_PROBE = (
    "import time; t0 = time.perf_counter(); import torch; t1 = time.perf_counter(); "
    "from runtime import Accelerator, set_seed; t2 = time.perf_counter(); print(t1 - t0, t2 - t1)"
)


def _mlp():
    from torch import nn

    return nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def _dataset(samples: int):
    import torch
    from torch.utils.data import TensorDataset

    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(samples, 128, generator=g), torch.randint(0, 10, (samples,), generator=g))


def _timed(step, batches, steps: int) -> float:
    """Seconds per step over `steps` steps, cycling through the loader as needed."""
    it = iter(batches)
    start = time.perf_counter()
    for _ in range(steps):
        try:
            batch = next(it)
        except StopIteration:
            it = iter(batches)
            batch = next(it)
        step(batch)
    return (time.perf_counter() - start) / steps


def _raw_ddp_loop(batch_size: int, samples: int, distributed: bool = True):
    """The loop a user writes by hand: DDP, a DistributedSampler, .to(device)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler

    torch.manual_seed(0)
    model = DistributedDataParallel(_mlp()) if distributed else _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = _dataset(samples)
    if distributed:
        sampler = DistributedSampler(data, num_replicas=dist.get_world_size(), rank=dist.get_rank())
        loader = DataLoader(data, batch_size=batch_size, sampler=sampler)
    else:
        loader = DataLoader(data, batch_size=batch_size, shuffle=True)
    device = torch.device("cpu")

    def step(batch):
        x, y = batch[0].to(device), batch[1].to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()

    return step, loader


def _runtime_loop(acc, batch_size: int, samples: int):
    """The same loop as migrated scripts write it, through the Accelerator."""
    import torch
    from torch.utils.data import DataLoader

    torch.manual_seed(0)
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(_dataset(samples), batch_size=batch_size, shuffle=True)
    model, opt, loader = acc.prepare(model, opt, loader)

    def step(batch):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(model(x), y)
        acc.backward(loss)
        opt.step()
        opt.zero_grad()

    return step, loader


def _interleaved(acc, raw, ours, repeats: int, steps: int) -> dict[str, list[float]]:
    for loop in (raw, ours):  # warm-up: allocator, DDP buckets, first iterations
        _timed(*loop, steps)
    times: dict[str, list[float]] = {"raw": [], "runtime": []}
    for repeat in range(repeats):
        order = [("raw", raw), ("runtime", ours)]
        for name, loop in order if repeat % 2 == 0 else order[::-1]:  # no loop always goes first
            acc.wait_for_everyone()
            times[name].append(_timed(*loop, steps))
    return times


def worker(out: str, repeats: int, steps: int, batch_size: int) -> None:
    """One of the 2 processes: time both loops, interleaved; rank 0 writes the times."""
    from runtime import Accelerator

    acc = Accelerator(cpu=True)
    samples = batch_size * acc.num_processes * 32
    times = _interleaved(acc, _raw_ddp_loop(batch_size, samples), _runtime_loop(acc, batch_size, samples), repeats, steps)
    if acc.is_main_process:
        Path(out).write_text(json.dumps(times))
    acc.end_training()


def single_process_overhead(repeats: int, steps: int) -> dict[str, list[float]]:
    """Both loops in this process with a batch of 1: what is left is per-step framework cost."""
    import torch

    from runtime import Accelerator

    torch.set_num_threads(1)
    acc = Accelerator(cpu=True)
    raw = _raw_ddp_loop(1, 256, distributed=False)
    return _interleaved(acc, raw, _runtime_loop(acc, 1, 256), repeats, steps * 5)


def import_overhead(runs: int) -> tuple[float, float]:
    """Median seconds of `import torch`, and of the runtime import after it, in fresh interpreters."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"}
    torch_times, runtime_times = [], []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", IMPORT_PROBE], env=env, capture_output=True, text=True, check=True)
        torch_s, runtime_s = map(float, done.stdout.split())
        torch_times.append(torch_s)
        runtime_times.append(runtime_s)
    return statistics.median(torch_times), statistics.median(runtime_times)


def step_times(repeats: int, steps: int, batch_size: int) -> dict[str, list[float]]:
    """Launch the 2-process worker through accel-launch and collect its measurements."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "times.json")
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
        command = [sys.executable, "-m", "runtime.launch", "--nproc-per-node", "2", "--cpu", __file__, "--worker", "--out", out]
        command += ["--repeats", str(repeats), "--steps", str(steps), "--batch-size", str(batch_size)]
        subprocess.run(command, env=env, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        return json.loads(Path(out).read_text())


def _report(times: dict[str, list[float]], raw_name: str, unit: str, scale: float, note: str) -> None:
    raw, ours = statistics.median(times["raw"]), statistics.median(times["runtime"])
    ratios = [r / w for r, w in zip(times["runtime"], times["raw"])]
    print(f"  {raw_name:<18} {raw * scale:8.3f} {unit}/step")
    print(f"  {'runtime':<18} {ours * scale:8.3f} {unit}/step")
    print(f"  {'ratio':<18} {ours / raw:8.3f}  (median of per-repeat ratios {statistics.median(ratios):.3f}; {note})")
    # On a shared machine the fastest repeat is the one least disturbed by other work.
    print(f"  {'ratio of fastest':<18} {min(times['runtime']) / min(times['raw']):8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--steps", type=int, default=40, help="steps per timed repeat")
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--import-runs", type=int, default=7)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.out, args.repeats, args.steps, args.batch_size)
        return
    times = step_times(args.repeats, args.steps, args.batch_size)
    print(f"step time, 2 processes (gloo, CPU), MLP 128-512-512-10, batch {args.batch_size}/process,")
    print(f"  median of {args.repeats} repeats x {args.steps} steps, loops interleaved in the same processes:")
    _report(times, "raw torch DDP", "ms", 1e3, "aim <= 1.03")
    single = single_process_overhead(args.repeats, args.steps)
    print(f"step time, 1 process, same MLP, batch 1 (framework cost only), {args.steps * 5} steps/repeat:")
    _report(single, "raw torch", "us", 1e6, "the difference is the runtime's own cost per step")
    torch_s, runtime_s = import_overhead(args.import_runs)
    print(f"import, median of {args.import_runs} fresh interpreters:")
    print(f"  import torch       {torch_s * 1e3:8.1f} ms")
    print(f"  + import runtime   {runtime_s * 1e3:8.1f} ms  (aim < 50 ms)")


if __name__ == "__main__":
    main()
