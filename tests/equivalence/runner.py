"""Runs training scripts in subprocesses and reads back what each process printed per step.

Every run is in its own session with a hard timeout; its whole process group is killed
when it ends, times out or the test fails, so no rank outlives a test. Multi-process runs
go through the real launchers (`accel-launch`, `accelerate launch`) with torchrun's
`PET_TEE=3` (torchrun reads every option from a `PET_*` variable too), which prefixes each
line with `[default<rank>]:` so the per-rank records can be told apart.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from tests.equivalence import forked

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

_TAG = re.compile(r"\[default(\d+)\]:")


def tagged_lines(output: str):
    """(rank, text) for every line of a teed run; no tag: rank 0. torchrun's tee polls the
    ranks' log files, and on a loaded machine it can glue a rank's partial line to another
    rank's line (`[default1]:x[default0]:step 1 ...`): each tag starts a piece of its own."""
    for line in output.splitlines():
        tags = list(_TAG.finditer(line))
        if not tags:
            yield 0, line
            continue
        if tags[0].start() > 0:
            yield 0, line[: tags[0].start()]
        for tag, following in zip(tags, [*tags[1:], None]):
            yield int(tag.group(1)), line[tag.end() : following.start() if following else len(line)]
_NUMBER = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
_FIELDS = {name: re.compile(rf"\b{name}\b\s*[:=]?\s*{_NUMBER}") for name in ("epoch", "step", "loss", "lr")}


@dataclass(frozen=True)
class Step:
    """One printed training step; `*_ulp` is one unit in the last printed place of the value."""

    loss: float
    lr: float | None = None
    epoch: int | None = None
    step: int | None = None
    loss_ulp: float = 0.0
    lr_ulp: float = 0.0


@dataclass
class Run:
    """A finished run: exit status, the output, and each rank's steps in printed order."""

    command: list[str]
    returncode: int
    output: str
    seconds: float
    ranks: dict[int, list[Step]] = field(default_factory=dict)

    def check(self) -> Run:
        assert self.returncode == 0, f"exit status {self.returncode}: {' '.join(self.command)}\n{self.output[-5000:]}"
        assert self.ranks and all(self.ranks.values()), f"no step/loss lines printed: {self.command}\n{self.output[-3000:]}"
        return self

    @property
    def steps(self) -> list[Step]:
        """Rank 0's steps (a single process's only)."""
        return self.ranks[0]


def parse_steps(output: str, pattern: str | None = None) -> dict[int, list[Step]]:
    """Every step line, grouped by the rank prefix torchrun's tee adds (no prefix: rank 0).

    By default a step line names both a step and a loss (`step 3 ... loss 0.25 ... lr 0.1`),
    so an evaluation's "test loss" is not a step. `pattern` (a fixture's own print format)
    is a regex with named groups: `loss`, and optionally `lr`, `epoch`, `step`.
    """
    custom = re.compile(pattern) if pattern else None
    ranks: dict[int, list[Step]] = {}
    for rank, line in tagged_lines(output):
        if custom:
            match = custom.search(line)
            text = {k: v for k, v in match.groupdict().items() if v is not None} if match else {}
        else:
            found = {name: regex.search(line) for name, regex in _FIELDS.items()}
            text = {name: m.group(1) for name, m in found.items() if m} if found["step"] else {}
        if "loss" not in text:
            continue
        ranks.setdefault(rank, []).append(
            Step(
                loss=float(text["loss"]),
                lr=float(text["lr"]) if "lr" in text else None,
                epoch=int(float(text["epoch"])) if "epoch" in text else None,
                step=int(float(text["step"])) if "step" in text else None,
                loss_ulp=_ulp(text["loss"]),
                lr_ulp=_ulp(text["lr"]) if "lr" in text else 0.0,
            )
        )
    return ranks


def _ulp(number: str) -> float:
    """One unit in the last place a printed number shows ("0.123400" -> 1e-6, "3.5e-05" -> 1e-6)."""
    match = re.fullmatch(r"[-+]?\d*(?:\.(\d*))?(?:[eE]([-+]?\d+))?", number)
    if not match:
        return 0.0
    return 10.0 ** (int(match.group(2) or 0) - len(match.group(1) or ""))


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test process's environment minus any launch state, on CPU, with the repo importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_", "ACCELERATE_", "TORCHELASTIC_", "PET_"))}
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONWARNINGS"] = "ignore"
    env["OMP_NUM_THREADS"] = "1"  # what torchrun gives each worker; the same for every run compared
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["HF_HUB_OFFLINE"] = "1"
    if sys.platform.startswith("linux"):
        env["GLOO_SOCKET_IFNAME"] = "lo"
    env.update(extra or {})
    return env


def run(
    command: Sequence[str], cwd: Path, timeout: float, env: dict[str, str] | None = None, pattern: str | None = None
) -> Run:
    """Run to completion or kill the whole session at `timeout`; stdout and stderr together.
    A one-process script runs forked from a server with torch imported (forked.py)."""
    start = time.monotonic()
    if forked.usable(list(command)):
        status, output = forked.run(list(command), cwd, child_env(env), timeout)
        if status is None:
            raise AssertionError(f"timed out after {timeout}s: {' '.join(command)}\n{output[-3000:]}")
        return Run(list(command), status, output, time.monotonic() - start, parse_steps(output, pattern))
    proc = subprocess.Popen(
        list(command),
        cwd=cwd,
        env=child_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_session(proc)
        output, _ = proc.communicate()
        raise AssertionError(f"timed out after {timeout}s: {' '.join(command)}\n{output[-3000:]}") from None
    finally:
        _kill_session(proc)
    return Run(list(command), proc.returncode, output, time.monotonic() - start, parse_steps(output, pattern))


def _kill_session(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode is None:
        proc.kill()
        proc.wait()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def python_cmd(script: Path, args: Sequence[str]) -> list[str]:
    return [sys.executable, str(script), *args]


def torchrun_cmd(script: Path, args: Sequence[str], nproc: int = 1) -> list[str]:
    """An original written for torchrun (it reads RANK/LOCAL_RANK and joins the group
    itself), run as its author runs it: torchrun, standalone on this machine."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), str(script), *args]


def accel_launch_cmd(script: Path, args: Sequence[str], nproc: int) -> list[str]:
    """Our launcher as a user runs it (the console script; `python -m runtime.launch` if absent)."""
    exe = BIN / "accel-launch"
    launcher = [str(exe)] if exe.exists() else [sys.executable, "-m", "runtime.launch"]
    return [*launcher, "--nproc-per-node", str(nproc), str(script), *args]


def accelerate_launch_cmd(script: Path, args: Sequence[str], nproc: int) -> list[str]:
    """Hugging Face's launcher for N > 1 processes on CPU.

    `accelerate launch --cpu` starts ONE process (its simple launcher), so N processes need
    `--multi_gpu` (torchrun underneath), and ACCELERATE_USE_CPU=true (ACCELERATE_ENV) so that
    Accelerate forms a gloo group (MULTI_CPU) instead of running N unaware copies.
    `--tee 3` prefixes each line with its rank, as PET_TEE does for accel-launch.
    """
    exe = BIN / "accelerate"
    launcher = [str(exe)] if exe.exists() else [sys.executable, "-m", "accelerate.commands.accelerate_cli"]
    return [
        *launcher, "launch", "--multi_gpu", "--num_processes", str(nproc), "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--tee", "3",
        "--main_process_port", str(free_port()), str(script), *args,
    ]  # fmt: skip


ACCELERATE_ENV = {
    "ACCELERATE_USE_CPU": "true",
    # Leave the gloo group before teardown, as our worker does (leave_group_at_exit/sitecustomize.py).
    "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "leave_group_at_exit"), str(REPO)]),
}
# Originals only: `.cuda()` is a no-op where no GPU is visible (gpu_on_cpu/sitecustomize.py).
GPU_ON_CPU_ENV = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "gpu_on_cpu"), str(REPO)])}
TEE_ENV = {"PET_TEE": "3"}


def close(a: float, b: float, atol: float, rtol: float = 0.0) -> bool:
    if math.isnan(a) or math.isnan(b):
        return False
    return abs(a - b) <= atol + rtol * abs(b)


def parse_metrics(output: str, pattern: str) -> dict[int, list[dict[str, float]]]:
    """Every evaluation line `pattern` (named groups, one per value) finds, per rank."""
    regex = re.compile(pattern)
    ranks: dict[int, list[dict[str, float]]] = {}
    for rank, line in tagged_lines(output):
        match = regex.search(line)
        if match:
            ranks.setdefault(rank, []).append({k: float(v) for k, v in match.groupdict().items() if v is not None})
    return ranks
