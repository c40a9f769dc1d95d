"""From accel-launch's settings to torchrun: the argv and environment (pure), then the run.

torch.distributed.run does the launching, rendezvous, and tearing down of the other ranks
when one fails; this module only builds its command line and reports a failure briefly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import signal
import socket
import sys
import tempfile
from dataclasses import dataclass
from typing import Iterator, Mapping

from runtime.process import (
    ENV_FSDP_CPU_OFFLOAD,
    ENV_FSDP_MIN_NUM_PARAMS,
    ENV_FSDP_RESHARD_AFTER_FORWARD,
    ENV_FSDP_WRAP_CLASSES,
    ENV_OMP_NUM_THREADS,
    ENV_PYTHONHASHSEED,
    ENV_USE_FSDP,
    MIXED_PRECISION_CHOICES,
    LauncherSettings,
)

# Each worker runs the script through this module so an uncaught error reaches torchrun's error file.
CHILD_MODULE = "runtime.launch.child"


class LaunchConfigError(ValueError):
    """An accel-launch setting that cannot work; the message says which and why."""


@dataclass(frozen=True)
class LaunchConfig:
    """Everything accel-launch was asked to do. None means "pick the default at run time"."""

    script: str
    script_args: tuple[str, ...] = ()
    nproc_per_node: int | None = None
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int | None = None
    mixed_precision: str | None = None
    cpu: bool = False
    fsdp: bool = False
    fsdp_wrap_classes: tuple[str, ...] = ()
    fsdp_min_num_params: int | None = None
    fsdp_reshard_after_forward: bool | None = None
    fsdp_cpu_offload: bool | None = None
    process_group_timeout: float | None = None  # seconds a collective waits for the others

    @property
    def several_ranks(self) -> bool:
        """More than one process in the job, so output lines need their rank."""
        return self.nnodes * (self.nproc_per_node or 1) > 1

    def __post_init__(self) -> None:
        if self.nproc_per_node is not None and self.nproc_per_node < 1:
            raise LaunchConfigError(f"--nproc-per-node must be at least 1, got {self.nproc_per_node}")
        if self.nnodes < 1:
            raise LaunchConfigError(f"--nnodes must be at least 1, got {self.nnodes}")
        if not 0 <= self.node_rank < self.nnodes:
            raise LaunchConfigError(f"--node-rank must be in 0..{self.nnodes - 1}, got {self.node_rank}")
        if self.master_port is not None and not 0 < self.master_port < 65536:
            raise LaunchConfigError(f"--master-port must be in 1..65535, got {self.master_port}")
        if self.mixed_precision is not None and self.mixed_precision not in MIXED_PRECISION_CHOICES:
            choices = ", ".join(MIXED_PRECISION_CHOICES)
            raise LaunchConfigError(f"--mixed-precision must be one of {choices}, got {self.mixed_precision!r}")
        if self.fsdp_min_num_params is not None and self.fsdp_min_num_params < 1:
            raise LaunchConfigError(f"--fsdp-min-num-params must be at least 1, got {self.fsdp_min_num_params}")
        if self.process_group_timeout is not None and not self.process_group_timeout > 0:
            raise LaunchConfigError(f"--process-group-timeout must be a positive number of seconds, got {self.process_group_timeout}")
        fsdp_details = self.fsdp_wrap_classes or self.fsdp_min_num_params is not None
        if not self.fsdp and (fsdp_details or self.fsdp_cpu_offload or self.fsdp_reshard_after_forward is not None):
            raise LaunchConfigError("the --fsdp-* settings need --fsdp (or fsdp = true in [tool.accel-launch])")


def resolve_defaults(config: LaunchConfig, cuda_devices: int, free_port: int | None = None) -> LaunchConfig:
    """Fill the run-time defaults: one process per GPU (else 1), a free port on a single node."""
    nproc = config.nproc_per_node
    if nproc is None:
        nproc = 1 if config.cpu else max(cuda_devices, 1)
    port = config.master_port
    if port is None and config.nnodes == 1:
        port = free_port if free_port is not None else find_free_port(config.master_addr)
    return dataclasses.replace(config, nproc_per_node=nproc, master_port=port)


def torchrun_argv(config: LaunchConfig, log_dir: str | None = None) -> list[str]:
    """torchrun's command line for `config`; everything after the script is passed untouched.

    Workers print straight to the terminal (with several ranks, launch/child.py puts each
    line's rank before it); `log_dir` holds torchrun's error files.
    """
    argv = [
        "--nnodes", str(config.nnodes),
        "--nproc-per-node", str(config.nproc_per_node or 1),
        "--node-rank", str(config.node_rank),
        "--master-addr", config.master_addr,
    ]  # fmt: skip
    if config.master_port is not None:
        argv += ["--master-port", str(config.master_port)]
    if log_dir is not None:
        argv += ["--log-dir", log_dir]
    # No elastic restarts: a failed rank ends the job, as a plain script's error would.
    argv += ["--max-restarts", "0", "--module", CHILD_MODULE, config.script, *config.script_args]
    return argv


def script_env(config: LaunchConfig) -> dict[str, str]:
    """The variables that carry accel-launch's settings to the script (names in runtime.process)."""
    env = LauncherSettings(
        mixed_precision=config.mixed_precision, cpu=True if config.cpu else None,
        process_group_timeout_s=config.process_group_timeout,
    ).to_env()
    if config.fsdp:
        env[ENV_USE_FSDP] = "1"
        if config.fsdp_wrap_classes:
            env[ENV_FSDP_WRAP_CLASSES] = ",".join(config.fsdp_wrap_classes)
        if config.fsdp_min_num_params is not None:
            env[ENV_FSDP_MIN_NUM_PARAMS] = str(config.fsdp_min_num_params)
        if config.fsdp_reshard_after_forward is not None:
            env[ENV_FSDP_RESHARD_AFTER_FORWARD] = "1" if config.fsdp_reshard_after_forward else "0"
        if config.fsdp_cpu_offload is not None:
            env[ENV_FSDP_CPU_OFFLOAD] = "1" if config.fsdp_cpu_offload else "0"
    return env


def launch_env(config: LaunchConfig, environ: Mapping[str, str], cpu_count: int) -> dict[str, str]:
    """Everything accel-launch sets for a run: the script's settings, the threads per worker
    and one str-hash seed for all processes."""
    env = script_env(config)
    threads = omp_threads(config, environ, cpu_count)
    if threads is not None:
        env[ENV_OMP_NUM_THREADS] = threads
    seed = hash_seed(config, environ)
    if seed is not None:
        env[ENV_PYTHONHASHSEED] = seed
    return env


def hash_seed(config: LaunchConfig, environ: Mapping[str, str]) -> str | None:
    """One PYTHONHASHSEED for every process of a run when the user set none.

    Python randomises str hashing per process, so `list(set(words))` orders a vocabulary
    differently on each rank and token ids stop meaning the same word: DDP then averages
    gradients of different embeddings. The seed is derived from what every machine's
    launcher is given (rendezvous address and port, the script and its arguments), so all
    nodes agree without talking, and it still changes from run to run with the port.
    """
    if environ.get(ENV_PYTHONHASHSEED) is not None:
        return None
    key = f"{config.master_addr}:{config.master_port}:{config.script}:{' '.join(config.script_args)}"
    return str(int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % (2**32 - 1) + 1)


def omp_threads(config: LaunchConfig, environ: Mapping[str, str], cpu_count: int) -> str | None:
    """OMP_NUM_THREADS for each worker when the user set none: this machine's cores shared
    among its processes (torchrun would pick 1, and print a banner saying so)."""
    nproc = config.nproc_per_node or 1
    if environ.get(ENV_OMP_NUM_THREADS) or nproc == 1:
        return None
    return str(max(1, cpu_count // nproc))


def usable_cpus() -> int:
    """Cores this process may run on (its affinity, e.g. under a container's limit)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


def find_free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host if host in ("127.0.0.1", "localhost") else "", 0))
        return int(sock.getsockname()[1])


def run(config: LaunchConfig) -> int:
    """Run torchrun in this process; returns the exit status for accel-launch."""
    from torch.distributed import DistError
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous import RendezvousError

    from runtime.launch.failure import describe_failure

    logs = tempfile.TemporaryDirectory(prefix="accel-launch-")  # torchrun's error files, removed after
    args = torchrun.parse_args(torchrun_argv(config, log_dir=logs.name))
    with logs, scoped_environment(launch_env(config, os.environ, usable_cpus())):
        try:
            torchrun.run(args)
        except ChildFailedError as error:
            report = describe_failure(error.failures)
            print(report.message, file=sys.stderr)
            return report.exit_code
        except (SignalException, KeyboardInterrupt) as stop:
            sig = getattr(stop, "sigval", signal.SIGINT)
            print(f"accel-launch: stopped by {signal.Signals(sig).name}; all processes were shut down", file=sys.stderr)
            return 128 + int(sig)
        except json.JSONDecodeError as error:  # torchrun could not parse a worker's error file
            print(f"accel-launch: a worker failed and its error report could not be read ({error}); "
                  "its own output above says why", file=sys.stderr)
            return 1
        except (RendezvousError, DistError, TimeoutError) as error:
            where = f"{config.master_addr}:{config.master_port}"
            print(f"accel-launch: the job could not start (rendezvous at {where}): {error}", file=sys.stderr)
            return 1
    return 0


@contextlib.contextmanager
def scoped_environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set `values` in os.environ for the block (the workers started inside inherit
    them) and put the previous values back after."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
