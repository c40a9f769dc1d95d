"""Runs the user's script inside a torchrun worker, as `python script.py args` would.

An uncaught exception is written to the error file torchrun gave this worker (torchrun's
own JSON format, plus the time it was raised), which is how accel-launch names the rank
that failed first and shows its last error lines without parsing logs.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
import traceback
from types import TracebackType

from runtime.launch.prefix import PrefixedStream, rank_prefix
from runtime.process import ENV_ERROR_FILE, ENV_RANK, ENV_TORCHRUN_REDIRECTS, ENV_TORCHRUN_TEE, ENV_WORLD_SIZE


def main(argv: list[str] | None = None) -> None:
    """Run `argv[0]` as `__main__` with `argv[1:]` as its arguments."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        raise SystemExit("usage: python -m runtime.launch.child SCRIPT [ARGS...]")
    script = os.path.abspath(args[0])
    _prefix_output_lines()
    sys.argv = args
    # `python script.py` puts the script's folder first on sys.path, not the working directory.
    sys.path[0] = os.path.dirname(script)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        if stop.code in (None, 0):
            _leave_process_group()
            raise
        code = stop.code if isinstance(stop.code, int) else 1
        if not isinstance(stop.code, int):
            print(stop.code, file=sys.stderr)
        _record(stop, _from_script(stop.__traceback__, script), f"exited with code {code}")
        _exit(code)
    except BaseException as error:  # noqa: BLE001 - report anything the script let escape
        tb = _from_script(error.__traceback__, script)
        _record(error, tb)
        sys.excepthook(type(error), error, tb)
        _exit(1)
    else:
        _leave_process_group()


def _prefix_output_lines() -> None:
    """With several ranks, put `[rankN]: ` before each line this process prints."""
    if int(os.environ.get(ENV_WORLD_SIZE, "1") or 1) <= 1:
        return
    if any(os.environ.get(name, "0") not in ("", "0") for name in (ENV_TORCHRUN_TEE, ENV_TORCHRUN_REDIRECTS)):
        return  # torchrun tees or redirects the output, and prefixes the lines itself
    prefix = rank_prefix(int(os.environ.get(ENV_RANK, "0") or 0))
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if hasattr(stream, "reconfigure"):
            # One write per line (a pipe or file would get blocks), so ranks do not mix within a line.
            stream.reconfigure(line_buffering=True)
        setattr(sys, name, PrefixedStream(stream, prefix))


def _leave_process_group() -> None:
    """Leave a process group the finished script left alive, as `end_training()` would.

    Scripts rarely call end_training(). Gloo's worker thread frees each finished collective
    itself, and that needs the GIL; if the interpreter is already finalising, the thread is
    unwound and the process abort()s ("terminate called without an active exception"): a
    run that finished ends in SIGABRT on some ranks (https://github.com/pytorch/pytorch/pull/179291).
    So wait for every rank, destroy the group, and release the GIL a moment so the worker
    can free the last collective while the interpreter is still whole.
    """
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available():
        return
    if dist.is_initialized():
        if dist.get_backend() == "nccl":  # named, else NCCL warns it guesses the device at every exit
            import torch

            dist.barrier(device_ids=[torch.cuda.current_device()])
        else:
            dist.barrier()
        dist.destroy_process_group()
    time.sleep(0.05)  # also after the script's own end_training(): its barrier is just as fresh


def _exit(code: int) -> None:
    # Leave without interpreter teardown: a live gloo process group can abort() during it,
    # which would turn the script's own error into a SIGABRT.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _from_script(tb: TracebackType | None, script: str) -> TracebackType | None:
    """Drop the frames of this module and runpy that precede the script's own."""
    current = tb
    while current is not None and os.path.abspath(current.tb_frame.f_code.co_filename) != script:
        current = current.tb_next
    return current or tb


def _record(error: BaseException, tb: TracebackType | None, message: str | None = None) -> None:
    path = os.environ.get(ENV_ERROR_FILE)
    if not path:
        return
    data = {
        "message": {
            "message": message or f"{type(error).__name__}: {error}",
            "extraInfo": {
                "py_callstack": "".join(traceback.format_exception(type(error), error, tb)),
                "timestamp": str(int(time.time())),
                "raised_at_ns": str(time.time_ns()),
            },
        }
    }
    # written whole or not at all: a worker stopped while writing (the others' SIGTERM when one
    # rank fails) left an empty file torchrun could not parse (JSONDecodeError in accel-launch)
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "w") as handle:
        json.dump(data, handle)
    os.replace(partial, path)


if __name__ == "__main__":
    main()
