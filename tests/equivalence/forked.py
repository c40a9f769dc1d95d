"""One-process script runs forked from a server that has imported torch already.

`import torch` takes seconds on a CI machine, and the equivalence tests run well over a
hundred one-process scripts (originals at B and N*B, migrations on one process): most of
their time was that import. multiprocessing's forkserver imports torch once; each run is
a child forked from it that sets the run's environment, working directory, argv and
`sys.path[0]` as `python script.py` would, sends its output (Python's and C's: file
descriptors 1 and 2) to a file, runs the script as `__main__` and exits with its status.
Multi-process runs keep going through the real launchers. A script that starts processes
of its own (torch.multiprocessing, DataLoader workers) runs as a plain subprocess.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import re
import runpy
import sys
from pathlib import Path

_STARTS_PROCESSES = re.compile(r"multiprocessing|\bspawn\b|num_workers\s*=\s*[1-9a-z]|torch\.distributed|Popen")


def usable(command: list[str]) -> bool:
    """`python script.py ...` of a script that starts no processes of its own."""
    if os.environ.get("ACCEL_TESTS_NO_FORKSERVER") or len(command) < 2 or command[0] != sys.executable:
        return False
    script = Path(command[1])
    if script.suffix != ".py" or not script.is_file():
        return False
    return not _STARTS_PROCESSES.search(script.read_text(errors="replace"))


@functools.cache
def _context():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch"])
    return context


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int | None, str]:
    """(exit status, or None when killed at `timeout`; everything printed)."""
    output = Path(cwd) / ".forked-output"
    child = _context().Process(target=_run_script, args=(command[1], command[2:], str(cwd), env, str(output)))
    child.start()
    child.join(timeout)
    status = child.exitcode
    if child.is_alive():
        child.kill()
        child.join()
        status = None
    text = output.read_text(errors="replace") if output.exists() else ""
    output.unlink(missing_ok=True)
    return status, text


def _run_script(script: str, args: list[str], cwd: str, env: dict[str, str], output: str) -> None:
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    import warnings

    import torch

    if env.get("PYTHONWARNINGS") == "ignore":
        warnings.simplefilter("ignore")
    torch.set_num_threads(int(env.get("OMP_NUM_THREADS", torch.get_num_threads())))
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    for folder in paths:  # what the interpreter would have run at start-up
        if os.path.isfile(os.path.join(folder, "sitecustomize.py")):
            runpy.run_path(os.path.join(folder, "sitecustomize.py"))
    sys.path[:0] = [os.path.dirname(os.path.abspath(script)), *paths]
    sys.argv = [script, *args]
    status = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 1
    import atexit

    atexit._run_exitfuncs()  # what interpreter exit runs; a forked child ends with os._exit
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
