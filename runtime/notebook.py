"""Training on N processes from a notebook: `notebook_launcher(training_function, num_processes=2)`.

torch's elastic multiprocessing starts the workers on this machine, each with the variables
torchrun would give it, and stops the others when one fails; the Accelerator created inside
the function forms the process group from those variables, as under accel-launch. This
module only builds that environment, records a worker's error, and raises it in the notebook.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import sys
import tempfile
import time
import traceback
from typing import Any, Callable, Iterator, Mapping, Sequence

from runtime.launch.command import find_free_port, scoped_environment
from runtime.process import (
    ENV_ERROR_FILE,
    ENV_LOCAL_RANK,
    ENV_LOCAL_WORLD_SIZE,
    ENV_MASTER_ADDR,
    ENV_MASTER_PORT,
    ENV_NODE_RANK,
    ENV_RANK,
    ENV_WORLD_SIZE,
    MIXED_PRECISION_CHOICES,
    LauncherSettings,
)

MASTER_ADDR = "127.0.0.1"
# torch's elastic multiprocessing logs every failure and every worker it stops; the error
# raised in the notebook already says which rank failed and why.
_ELASTIC_LOGGER = "torch.distributed.elastic.multiprocessing.api"


class WorkerFailedError(RuntimeError):
    """A worker of `notebook_launcher` failed; the message holds its traceback.

    `rank` is the rank that failed first (others that failed after it, usually because it
    left, are named in the message), `exit_code` its exit status.
    """

    def __init__(self, message: str, rank: int, exit_code: int) -> None:
        super().__init__(message)
        self.rank = rank
        self.exit_code = exit_code


def notebook_launcher(
    function: Callable[..., Any],
    args: Sequence[Any] = (),
    num_processes: int | None = None,
    *,
    mixed_precision: str | None = None,
    cpu: bool = False,
    master_port: int | None = None,
) -> None:
    """Run `function(*args)` on `num_processes` processes of this machine; return when
    all have finished, or raise WorkerFailedError with the failing rank's traceback.

    Create the Accelerator inside `function`: each process makes its own. Workers are
    forked from this process where the platform can (Linux, macOS), so a function defined
    in a notebook cell works, as with Hugging Face Accelerate's launcher of the same name;
    under spawn (Windows) it must be importable. `num_processes` defaults to one per GPU
    (one on a machine without GPUs); gloo on CPU (or with `cpu=True`), NCCL on GPUs, over
    127.0.0.1 and a free port unless `master_port` is given. One process runs `function`
    right here. `mixed_precision` ("no", "fp16", "bf16") and `cpu` reach the Accelerator
    as accel-launch's settings do.
    """
    import torch

    gpus = 0 if cpu else torch.cuda.device_count()
    nproc = num_processes if num_processes is not None else max(gpus, 1)
    _check(nproc, gpus, mixed_precision)
    settings = LauncherSettings(mixed_precision=mixed_precision, cpu=True if cpu else None).to_env()
    if nproc == 1:
        with scoped_environment(settings):
            function(*args)
        return
    _check_fresh_kernel(torch, gpus)
    port = master_port if master_port is not None else find_free_port(MASTER_ADDR)
    envs = {rank: {**worker_env(rank, nproc, port), **settings} for rank in range(nproc)}
    _run(function, tuple(args), envs)


def worker_env(rank: int, world_size: int, port: int) -> dict[str, str]:
    """What torchrun sets for worker `rank` of a one-machine job (names in runtime.process)."""
    return {
        ENV_RANK: str(rank),
        ENV_LOCAL_RANK: str(rank),
        ENV_WORLD_SIZE: str(world_size),
        ENV_LOCAL_WORLD_SIZE: str(world_size),
        ENV_NODE_RANK: "0",
        ENV_MASTER_ADDR: MASTER_ADDR,
        ENV_MASTER_PORT: str(port),
    }


def start_method() -> str:
    """fork where the platform has it (notebook functions need no import), else spawn."""
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


def _check(nproc: int, gpus: int, mixed_precision: str | None) -> None:
    if nproc < 1:
        raise ValueError(f"num_processes must be at least 1, got {nproc}")
    if gpus and nproc > gpus:
        raise ValueError(f"num_processes={nproc} but this machine has {gpus} GPU(s); pass cpu=True to train on CPU")
    if mixed_precision is not None and mixed_precision not in MIXED_PRECISION_CHOICES:
        raise ValueError(f"mixed_precision must be one of {', '.join(MIXED_PRECISION_CHOICES)}, got {mixed_precision!r}")


def _check_fresh_kernel(torch: Any, gpus: int) -> None:
    """What a forked worker cannot inherit: a live process group or an initialised CUDA."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        raise RuntimeError(
            "a process group already exists in this kernel (an Accelerator created under a launcher?); "
            "restart the kernel and create the Accelerator only inside the function you launch"
        )
    if gpus and start_method() == "fork" and torch.cuda.is_initialized():
        raise RuntimeError(
            "CUDA is already initialised in this kernel, and forked workers cannot use it; restart the "
            "kernel and keep everything that touches the GPU (the Accelerator, models, tensors) inside "
            "the function you launch"
        )


def _run(function: Callable[..., Any], args: tuple, envs: dict[int, dict[str, str]]) -> None:
    """Start the workers through torch's elastic multiprocessing and wait for all of them."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, start_processes

    with tempfile.TemporaryDirectory(prefix="notebook_launcher_") as log_dir, _quiet(_ELASTIC_LOGGER):
        context = start_processes(
            name="notebook_launcher",
            entrypoint=_Worker(function),
            args={rank: args for rank in envs},
            envs=envs,
            logs_specs=DefaultLogsSpecs(log_dir=log_dir),
            start_method=start_method(),
        )
        try:
            result = context.wait(period=0.1)
        finally:
            context.close()  # also on KeyboardInterrupt: no worker outlives the cell
        if result is not None and result.is_failed():
            raise _failure(result.failures, context.error_files, context.pids(), len(envs)) from None


class _Worker:
    """Runs the function in a worker and records an uncaught error for the notebook.

    The record uses torchrun's error-file format plus the time of the raise (as
    runtime/launch/child.py does), so the rank that failed first can be told from ranks
    that failed because it left. The worker then leaves with os._exit: no interpreter
    teardown, where a live gloo process group can abort() and hide the real error.
    """

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.__qualname__ = getattr(function, "__qualname__", type(self).__qualname__)

    def __call__(self, *args: Any) -> None:
        try:
            self.function(*args)
        except SystemExit as stop:
            if stop.code in (None, 0):
                return None
            _record(stop, f"exited with code {stop.code}")
            _leave(stop.code if isinstance(stop.code, int) else 1)
        except BaseException as error:  # noqa: BLE001 - anything the function let escape
            print(_record(error), end="", file=sys.stderr)  # this rank's own log, as torchrun shows it
            _leave(1)
        return None  # not the function's value: it may not pickle back to the notebook


def _record(error: BaseException, message: str | None = None) -> str:
    """Write `error` to this worker's error file; return its traceback from the function down."""
    tb = error.__traceback__.tb_next if error.__traceback__ else None  # skip _Worker.__call__
    callstack = "".join(traceback.format_exception(type(error), error, tb))
    path = os.environ.get(ENV_ERROR_FILE)
    if path:
        data = {
            "message": {
                "message": message or f"{type(error).__name__}: {error}",
                "extraInfo": {
                    "py_callstack": callstack,
                    "timestamp": str(int(time.time())),
                    "raised_at_ns": str(time.time_ns()),
                },
            }
        }
        with open(path, "w") as handle:
            json.dump(data, handle)
    return callstack


def _leave(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _failure(first: Mapping[int, Any], error_files: Mapping[int, str], pids: Mapping[int, int], world: int) -> WorkerFailedError:
    """The error to raise: the rank whose recorded error came first, with its traceback."""
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    from runtime.launch.failure import describe_failure

    failures = dict(first)
    for rank, path in error_files.items():
        if rank not in failures and os.path.isfile(path) and os.path.getsize(path):
            failures[rank] = ProcessFailure(rank, pids.get(rank, -1), 1, path)
    report = describe_failure(failures)
    data = failures[report.rank].error_file_data if report.rank in failures else None
    info = data.get("message", {}) if isinstance(data, dict) else {}
    callstack = info.get("extraInfo", {}).get("py_callstack", "") if isinstance(info, dict) else ""
    lines = callstack.rstrip().splitlines() or list(report.lines)
    message = f"rank {report.rank} of {world} failed:\n" + "\n".join(f"    {line}" for line in lines)
    if report.also_failed:
        message += f"\nalso failed: {', '.join(report.also_failed)}"
    return WorkerFailedError(message, report.rank, report.exit_code)


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Silence one logger for the block (torch's elastic agent logs every worker exit)."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
