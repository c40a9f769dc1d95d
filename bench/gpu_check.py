"""The GPU check, one command: what the CPU test suite cannot show, on a machine with CUDA GPUs.

Run from the repository root, with a CUDA build of torch already installed (do NOT add
`-c .ci/constraints.txt`: it pins the CPU build of torch):

    pip install -e ".[runtime,test]" && python bench/gpu_check.py

It launches, through `accel-launch`, one process per GPU (1 GPU works too), NCCL:

  * the migrated fixture fixtures/e2e-train-classifier/expected.py (synthetic data, AdamW,
    warm-up + cosine schedule, clipping, evaluation), in full precision, fp16 and bf16
    (passes when it runs to the end and its training loss falls);
  * a worker that checks the device and backend, fp16 with the GradScaler (scale finite,
    loss falls), bf16 autocast (matmuls in bfloat16, loss falls);
  * FSDP (`accel-launch --fsdp`): each rank holds about 1/N of the parameters, loss falls,
    save_model writes a complete model.safetensors; skipped, saying so, when the runtime
    has no FSDP;
  * the FSDP strategy's own GPU cases (tests/runtime/scripts/fsdp_gpu_check.py: fp32
    equal to raw torch, bf16 autocast and policy, fp16 + GradScaler, CPU offload);
  * the per-step time of the same loop in raw PyTorch DDP, the runtime and Hugging Face
    Accelerate, interleaved in the same processes (the loops of bench/bench_runtime.py).

Prints a table (check, result, detail) and exits 1 when a check fails. On a machine
without a CUDA GPU it says so and exits 0 having run nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "fixtures" / "e2e-train-classifier" / "expected.py"
FIXTURE_ARGS = ["--epochs", "2", "--samples", "4096", "--width", "256", "--batch-size", "64", "--log-every", "8"]
FSDP_CASES = REPO / "tests" / "runtime" / "scripts" / "fsdp_gpu_check.py"
# The runtime may cost at most this much more per step than raw DDP before the check fails.
MAX_OVERHEAD = 1.10


# -- the coordinator: launches, reads results, prints the table ---------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per launch")
    parser.add_argument("--cpu-dry-run", action="store_true", help="exercise this script on CPU (gloo, 2 processes)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, Path(args.out), args.steps, args.repeats)
        return 0
    import torch

    if not args.cpu_dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA GPU on this machine (torch.cuda.is_available() is False); nothing to check.")
        return 0
    nproc = 2 if args.cpu_dry_run else torch.cuda.device_count()
    names = "CPU dry run" if args.cpu_dry_run else ", ".join(torch.cuda.get_device_name(i) for i in range(nproc))
    print(f"gpu_check: {nproc} process(es), one per device ({names}); torch {torch.__version__}", flush=True)
    launch = Launcher(nproc, args.cpu_dry_run, args.timeout)
    rows: list[tuple[str, bool | None, str]] = []
    for precision in ("no", "fp16", "bf16"):
        rows.append(check_fixture(launch, precision))
    for precision in ("fp16", "bf16"):
        rows.append(check_worker(launch, f"train-{precision}", ["--mixed-precision", precision], args))
    rows.append(check_fsdp(launch, args))
    rows.append(check_fsdp_cases(launch))
    rows += check_overhead(launch, args)
    return report(rows)


class Launcher:
    """Runs accel-launch with this machine's process count; dry runs go to CPU and gloo."""

    def __init__(self, nproc: int, cpu: bool, timeout: float) -> None:
        self.nproc, self.cpu, self.timeout = nproc, cpu, timeout

    def __call__(
        self, flags: list[str], script: Path, args: list[str], nproc: int | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        command = [sys.executable, "-m", "runtime.launch", "--nproc-per-node", str(nproc or self.nproc), *flags]
        if self.cpu:
            command.append("--cpu")
            env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
        command += [str(script), *args]
        try:
            return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired as error:
            output = (error.stdout or "") if isinstance(error.stdout, str) else ""
            return subprocess.CompletedProcess(command, 124, output, f"timed out after {self.timeout}s")


def check_fixture(launch: Launcher, precision: str) -> tuple[str, bool | None, str]:
    name = f"fixture e2e-train-classifier, {precision}"
    if launch.cpu and precision == "fp16":
        return name, None, "skipped: fp16 needs CUDA"
    done = launch(["--mixed-precision", precision], FIXTURE, FIXTURE_ARGS)
    losses = [float(line.split(" loss ")[1].split()[0]) for line in done.stdout.splitlines() if " step " in line]
    accuracy = [line.rsplit("accuracy ", 1)[1] for line in done.stdout.splitlines() if "accuracy" in line]
    if done.returncode != 0 or len(losses) < 2 or not accuracy:
        return name, False, f"exit {done.returncode}: {_tail(done)}"
    ok = all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]
    return name, ok, f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, eval accuracy {accuracy[-1].strip()}"


def check_worker(launch: Launcher, mode: str, flags: list[str], args: argparse.Namespace) -> tuple[str, bool | None, str]:
    if launch.cpu and "fp16" in mode:
        return mode, None, "skipped: fp16 needs CUDA"
    result, failure = _run_worker(launch, mode, flags, args)
    if failure:
        return mode, False, failure
    problems = [f"{key}: {value}" for key, value in result["problems"].items()]
    detail = f"{result['device']}/{result['backend']}, loss {result['first_loss']:.3f} -> {result['last_loss']:.3f}"
    detail += "".join(f", {key} {value}" for key, value in result.get("notes", {}).items())
    return mode, not problems, "; ".join(problems) or detail


def check_fsdp(launch: Launcher, args: argparse.Namespace) -> tuple[str, bool | None, str]:
    if str(REPO) not in sys.path:  # run as `python bench/gpu_check.py` without installing: runtime/ is beside bench/
        sys.path.insert(0, str(REPO))
    try:
        from runtime import FullyShardedDataParallelPlugin  # noqa: F401
    except ImportError:
        return "fsdp", None, "skipped: this runtime has no FSDP (no FullyShardedDataParallelPlugin)"
    return check_worker(launch, "fsdp", ["--fsdp"], args)


def check_fsdp_cases(launch: Launcher) -> tuple[str, bool | None, str]:
    """The FSDP strategy's own GPU script: fp32 equal to raw torch, bf16, fp16, CPU offload."""
    name = "fsdp cases (fsdp_gpu_check.py)"
    if not FSDP_CASES.exists():
        return name, None, f"skipped: {FSDP_CASES.relative_to(REPO)} is missing"
    if launch.cpu:
        return name, None, "skipped: needs CUDA"
    done = launch([], FSDP_CASES, [], nproc=1)  # its docstring's command: one process
    lines = [line.split("]: ", 1)[-1] for line in done.stdout.splitlines()]
    failed = [line[5:].split()[0] for line in lines if line.startswith("FAIL")]
    passed = sum(line.startswith("ok") for line in lines)
    for line in lines:
        if line.startswith(("ok", "FAIL")):
            print(f"  fsdp_gpu_check.py: {line}", flush=True)
    if done.returncode != 0 or failed or not passed:
        return name, False, f"exit {done.returncode}, failed: {', '.join(failed) or _tail(done)}"
    return name, True, f"{passed} cases ok (their lines are printed above the table)"


def check_overhead(launch: Launcher, args: argparse.Namespace) -> list[tuple[str, bool | None, str]]:
    result, failure = _run_worker(launch, "overhead", [], args)
    if failure:
        return [("overhead", False, failure)]
    times = result["times"]
    raw = statistics.median(times["raw DDP"])
    rows: list[tuple[str, bool | None, str]] = [("step time, raw PyTorch DDP", True, f"{raw * 1e3:.3f} ms/step")]
    for label in ("runtime", "Accelerate"):
        if not times.get(label):
            rows.append((f"step time, {label}", None, result["notes"].get(label, "not measured")))
            continue
        ours = statistics.median(times[label])
        ratio = statistics.median(r / w for r, w in zip(times[label], times["raw DDP"]))
        ok = ratio <= MAX_OVERHEAD if label == "runtime" else None
        rows.append((f"step time, {label}", ok, f"{ours * 1e3:.3f} ms/step, {ratio:.3f}x raw (median of per-repeat ratios)"))
    return rows


def _run_worker(launch: Launcher, mode: str, flags: list[str], args: argparse.Namespace) -> tuple[dict, str]:
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        out = Path(tmp)
        worker_args = ["--worker", mode, "--out", str(out), "--steps", str(args.steps), "--repeats", str(args.repeats)]
        done = launch(flags, Path(__file__), worker_args)
        result_file = out / "result.json"
        if done.returncode != 0 or not result_file.exists():
            return {}, f"exit {done.returncode}: {_tail(done)}"
        return json.loads(result_file.read_text()), ""


def _tail(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return " | ".join(lines[-3:])[-400:]


def report(rows: list[tuple[str, bool | None, str]]) -> int:
    width = max(len(name) for name, _, _ in rows)
    print(f"\n{'check'.ljust(width)}  result  detail")
    for name, ok, detail in rows:
        verdict = ("skip" if detail.startswith("skipped") else "info") if ok is None else ("ok" if ok else "FAIL")
        print(f"{name.ljust(width)}  {verdict:<6}  {detail}")
    failed = [name for name, ok, _ in rows if ok is False]
    print(f"\n{len(failed)} check(s) failed: {', '.join(failed)}" if failed else "\nall checks passed")
    return 1 if failed else 0


# -- the worker: runs inside each launched process ----------------------------------------


def worker(mode: str, out: Path, steps: int, repeats: int) -> None:
    import torch.distributed as dist

    from runtime import Accelerator

    acc = Accelerator()
    result = {
        "device": str(acc.device),
        "backend": dist.get_backend() if dist.is_initialized() else "single process",
        "problems": {},
        "notes": {},
    }
    if acc.device.type == "cuda" and acc.num_processes > 1 and result["backend"] != "nccl":
        result["problems"]["backend"] = f"{result['backend']} on CUDA, expected nccl"
    if mode == "overhead":
        result["times"] = _overhead(acc, steps, repeats, result["notes"])
    else:
        _train(acc, mode, steps, out, result)
    if acc.is_main_process:
        (out / "result.json").write_text(json.dumps(result))
    acc.end_training()
    if not acc.is_main_process and result["problems"]:
        raise SystemExit(f"rank {acc.process_index}: {result['problems']}")  # only rank 0 writes the file


def _train(acc, mode: str, steps: int, out: Path, result: dict) -> None:
    import torch

    sys.path.insert(0, str(REPO / "bench"))
    from bench_runtime import _mlp

    torch.manual_seed(0)
    model = _mlp()
    total = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(_learnable(64 * acc.num_processes * steps), batch_size=64, shuffle=True)
    model, opt, loader = acc.prepare(model, opt, loader)
    losses = []
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        acc.backward(loss)
        acc.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        losses.append(float(acc.reduce(loss.detach(), "mean")))
    result["first_loss"], result["last_loss"] = statistics.mean(losses[:5]), statistics.mean(losses[-5:])
    problems, notes = result["problems"], result["notes"]
    if not all(math.isfinite(x) for x in losses) or result["last_loss"] >= result["first_loss"]:
        problems["loss"] = f"did not fall: {result['first_loss']:.4f} -> {result['last_loss']:.4f}"
    if mode == "train-fp16":
        scale = acc.scaler.get_scale() if acc.scaler is not None else None
        if scale is None or not math.isfinite(scale) or scale <= 0:
            problems["scaler"] = f"GradScaler missing or broken (scale {scale})"
        notes["loss scale"] = scale
    if mode == "train-bf16":
        with acc.autocast():
            probe = torch.ones(4, 4, device=acc.device) @ torch.ones(4, 4, device=acc.device)
        if probe.dtype != torch.bfloat16:
            problems["autocast"] = f"matmul ran in {probe.dtype}, expected bfloat16"
    if mode == "fsdp":
        _check_sharded(acc, model, total, out, problems, notes)


def _learnable(samples: int):
    """bench_runtime's input shape, with labels a fixed projection picks: a loss that can fall."""
    import torch
    from torch.utils.data import TensorDataset

    g = torch.Generator().manual_seed(0)
    x = torch.randn(samples, 128, generator=g)
    return TensorDataset(x, (x @ torch.randn(128, 10, generator=g)).argmax(dim=1))


def _check_sharded(acc, model, total: int, out: Path, problems: dict, notes: dict) -> None:
    local = sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel() for p in model.parameters())
    share = local / total
    notes["parameters held by one rank"] = f"{share:.3f} of {total}"
    if acc.num_processes > 1 and not share < 1.5 / acc.num_processes:
        problems["sharding"] = f"rank {acc.process_index} holds {share:.2f} of the parameters, expected ~1/{acc.num_processes}"
    acc.save_model(model, out / "model")
    if acc.is_main_process:
        from safetensors.torch import load_file

        saved = load_file(out / "model" / "model.safetensors")
        if sum(t.numel() for t in saved.values()) != total:
            problems["save_model"] = f"model.safetensors holds {sum(t.numel() for t in saved.values())} of {total} values"


def _overhead(acc, steps: int, repeats: int, notes: dict) -> dict[str, list[float]]:
    """Step times of raw DDP, the runtime and Accelerate, interleaved in these processes."""
    import torch

    sys.path.insert(0, str(REPO / "bench"))
    from bench_runtime import _runtime_loop, _timed

    samples = 64 * acc.num_processes * 32
    loops = {"raw DDP": _raw_loop(acc, 64, samples), "runtime": _runtime_loop(acc, 64, samples)}
    try:
        from accelerate import Accelerator as HFAccelerator

        loops["Accelerate"] = _runtime_loop(HFAccelerator(cpu=acc.device.type == "cpu"), 64, samples)
    except Exception as error:  # noqa: BLE001 - a missing or failing Accelerate is reported, not fatal
        notes["Accelerate"] = f"not measured: {type(error).__name__}: {error}"[:200]

    def synced(step):
        def run(batch):
            step(batch)
            if acc.device.type == "cuda":
                torch.cuda.synchronize()  # count the GPU work, not just its launch

        return run

    timed = {name: (synced(step), loader) for name, (step, loader) in loops.items()}
    for loop in timed.values():
        _timed(*loop, steps)  # warm-up: allocator, DDP buckets, kernels chosen
    times: dict[str, list[float]] = {name: [] for name in timed}
    names = list(timed)
    for repeat in range(repeats):
        for name in names[repeat % len(names) :] + names[: repeat % len(names)]:  # rotate who goes first
            acc.wait_for_everyone()
            times[name].append(_timed(*timed[name], steps))
    return times


def _raw_loop(acc, batch_size: int, samples: int):
    """The loop written by hand: DDP on this process's device, a DistributedSampler, .to(device)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler

    sys.path.insert(0, str(REPO / "bench"))
    from bench_runtime import _dataset, _mlp

    torch.manual_seed(0)
    device = acc.device
    model = _mlp().to(device)
    if acc.num_processes > 1:
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = _dataset(samples)
    sampler = DistributedSampler(data, num_replicas=dist.get_world_size(), rank=dist.get_rank()) if acc.num_processes > 1 else None
    loader = DataLoader(data, batch_size=batch_size, sampler=sampler, shuffle=sampler is None)

    def step(batch):
        x, y = batch[0].to(device, non_blocking=True), batch[1].to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()

    return step, loader


if __name__ == "__main__":
    started = time.monotonic()
    status = main()
    if "--worker" not in sys.argv:
        print(f"({time.monotonic() - started:.0f} s)")
    sys.exit(status)
