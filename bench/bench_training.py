"""Training speed of a migrated script: `python bench/bench_training.py`.

One realistic fixture (fixtures/e2e-train-classifier: an MLP classifier, AdamW, warmup and
cosine schedule, clipping, an evaluation per epoch) is run as

  * the original script, 1 process;
  * the migrated script (our runtime), 1 process (`python migrated.py`);
  * the migrated script (our runtime), 2 processes (`accel-launch --nproc-per-node 2`);
  * the script migrated with --target accelerate, 2 processes under Hugging Face Accelerate
    (`accelerate launch --multi_gpu --num_processes 2`, ACCELERATE_USE_CPU=true);
  * the same under Hugging Face Accelerate on 1 process, for reference.

Each run's speed is read from the script's own per-step log line: the arrival times of
rank 0's lines give the step intervals, and a run's steps/s is 1 / the median interval
(start-up, process-group forming and the evaluation passes drop out). The variants run in
turn, `--repeats` times in rotating order so machine load affects all alike; the table
shows the median steps/s per variant, samples/s (a 2-process step consumes 2 batches), and
both as ratios to the original. Every process gets `--threads` intra-op threads (torchrun
gives its workers 1), so 1-process runs use 1 core and 2-process runs 2.
This is a command, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from migrator.api import migrate_source  # noqa: E402
from migrator.config import Config, Target  # noqa: E402
from tests.equivalence import runner  # noqa: E402

FIXTURE = REPO / "fixtures" / "e2e-train-classifier"
STEP = re.compile(r"\bstep (\d+) loss ")


def migrate(target: Target) -> str:
    result = migrate_source((FIXTURE / "input.py").read_bytes(), "input.py", Config(target=target))
    return result.after


def variants(folder: Path, args: list[str]) -> list[tuple[str, int, list[str], dict[str, str]]]:
    """(label, processes, command, extra environment) for each way of running the fixture."""
    ours, theirs = folder / "migrated_runtime.py", folder / "migrated_accelerate.py"
    ours.write_text(migrate(Target.RUNTIME))
    theirs.write_text(migrate(Target.ACCELERATE))
    found = [
        ("original", 1, runner.python_cmd(FIXTURE / "input.py", args), runner.GPU_ON_CPU_ENV),
        ("migrated, runtime, 1 process", 1, runner.python_cmd(ours, args), {}),
        ("migrated, runtime, 2 processes", 2, runner.accel_launch_cmd(ours, args, 2), {}),
    ]
    if shutil.which("accelerate", path=str(runner.BIN)) or _has_accelerate():
        launch = [c for c in runner.accelerate_launch_cmd(theirs, args, 2) if c not in ("--tee", "3")]
        found += [
            ("migrated, Accelerate, 2 processes", 2, launch, runner.ACCELERATE_ENV),
            ("migrated, Accelerate, 1 process", 1, runner.python_cmd(theirs, args), runner.ACCELERATE_ENV),
        ]
    return found


def _has_accelerate() -> bool:
    try:
        import accelerate  # noqa: F401
    except ImportError:
        return False
    return True


def steps_per_second(command: list[str], env: dict[str, str], cwd: Path, timeout: float) -> tuple[float, int]:
    """Run once; 1 / median interval between rank 0's step lines, and the number of steps."""
    full_env = runner.child_env({**env, "PYTHONUNBUFFERED": "1"})
    proc = subprocess.Popen(
        command, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, bufsize=1, start_new_session=True,
    )  # fmt: skip
    stamps: list[float] = []
    deadline = time.monotonic() + timeout
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if STEP.search(line):
                stamps.append(time.perf_counter())
            if time.monotonic() > deadline:
                raise TimeoutError(f"over {timeout}s: {' '.join(command)}")
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        runner._kill_session(proc)
    if proc.returncode != 0 or len(stamps) < 3:
        raise RuntimeError(f"exit status {proc.returncode}, {len(stamps)} step lines: {' '.join(command)}")
    intervals = [b - a for a, b in zip(stamps, stamps[1:])]
    return 1.0 / statistics.median(intervals), len(stamps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--samples", type=int, default=16384)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of every process")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    options = parser.parse_args()
    args = [
        "--batch-size", str(options.batch_size), "--samples", str(options.samples),
        "--width", str(options.width), "--epochs", str(options.epochs),
    ]  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="bench-training-"))
    try:
        runs = variants(folder, args)
        speeds: dict[str, list[float]] = {label: [] for label, *_ in runs}
        steps: dict[str, int] = {}
        for repeat in range(options.repeats):
            shift = repeat % len(runs)
            for label, _, command, env in runs[shift:] + runs[:shift]:
                env = {**env, "OMP_NUM_THREADS": str(options.threads)}
                rate, steps[label] = steps_per_second(command, env, folder, options.timeout)
                speeds[label].append(rate)
                print(f"  repeat {repeat + 1}: {label:<36} {rate:8.1f} steps/s", file=sys.stderr)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report(runs, speeds, steps, options)


def report(runs, speeds, steps, options) -> None:
    base = statistics.median(speeds["original"])
    print(
        f"fixture e2e-train-classifier: {options.samples} samples, width {options.width}, "
        f"batch {options.batch_size} per process, {options.epochs} epoch(s), "
        f"{options.threads} thread(s) per process, median of {options.repeats} runs"
    )
    print(f"{'variant':<36} {'steps':>6} {'steps/s':>9} {'ratio':>7} {'samples/s':>10} {'ratio':>7}")
    for label, nproc, *_ in runs:
        rate = statistics.median(speeds[label])
        samples = rate * nproc * options.batch_size
        print(
            f"{label:<36} {steps[label]:>6} {rate:>9.1f} {rate / base:>7.2f} "
            f"{samples:>10.0f} {samples / (base * options.batch_size):>7.2f}"
        )


if __name__ == "__main__":
    main()
