"""Runs test scripts through the real accel-launch (or plain python) in subprocesses.

Every run is on 127.0.0.1 with gloo, has a hard timeout, starts in its own session, and is
tagged with a unique environment variable; afterwards every process carrying the tag is
killed, and `Run.leftovers` says whether any had outlived its launcher.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import psutil

from runtime import process

REPO = Path(__file__).resolve().parents[3]
SCRIPTS = REPO / "tests" / "runtime" / "scripts"
_TAG = "ACCEL_TEST_RUN_TAG"  # test-only marker variable, not part of the runtime's contract


@dataclass
class Run:
    """One finished command: its exit status, combined output, and processes left behind."""

    returncode: int
    output: str
    leftovers: list[str]

    def check(self) -> Run:
        assert self.returncode == 0, f"exit status {self.returncode}; output:\n{self.output[-6000:]}"
        assert not self.leftovers, f"processes outlived the run: {self.leftovers}"
        return self


def launcher() -> list[str]:
    """The installed `accel-launch` next to this interpreter, else `python -m runtime.launch`."""
    script = Path(sys.executable).with_name("accel-launch")
    return [str(script)] if script.exists() else [sys.executable, "-m", "runtime.launch"]


def launch_args(script: str, *script_args: str, nproc: int = 2, extra: Sequence[str] = ()) -> list[str]:
    return [*launcher(), "--nproc-per-node", str(nproc), *extra, str(SCRIPTS / script), *script_args]


def python_args(script: str, *script_args: str) -> list[str]:
    return [sys.executable, str(SCRIPTS / script), *script_args]


def run(command: Sequence[str], cwd: Path, timeout: float = 180, env: dict[str, str | None] | None = None) -> Run:
    """Run `command` to completion (or kill it at `timeout`) and clean up after it."""
    with started(command, cwd, env) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
            raise AssertionError(f"timed out after {timeout}s: {command}\n{output[-6000:]}") from None
        return Run(proc.returncode, output, surviving(proc))


@contextlib.contextmanager
def started(command: Sequence[str], cwd: Path, env: dict[str, str | None] | None = None) -> Iterator[subprocess.Popen]:
    """Start `command` in its own session; on exit, kill its group and every tagged process."""
    tag = uuid.uuid4().hex
    proc = subprocess.Popen(
        list(command),
        cwd=cwd,
        env=child_env(tag, env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    proc.tag = tag  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        _kill(_tagged(tag))
        if proc.returncode is None:
            proc.kill()
            proc.communicate()


def surviving(proc: subprocess.Popen) -> list[str]:
    """Processes of this run still alive once the launcher has exited."""
    return [f"{p.pid} {' '.join(p.cmdline()[:4])}" for p in _tagged(proc.tag) if _alive(p)]  # type: ignore[attr-defined]


def child_env(tag: str, extra: dict[str, str | None] | None = None) -> dict[str, str]:
    contract = {value for name, value in vars(process).items() if name.startswith("ENV_")}
    env = {k: v for k, v in os.environ.items() if k not in contract}  # no stray launch settings
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONWARNINGS"] = "ignore"  # keep outputs readable (torch warns when NumPy is absent)
    env["OMP_NUM_THREADS"] = "1"  # two cores shared by the whole suite
    env["CUDA_VISIBLE_DEVICES"] = ""  # CPU and gloo, also on a machine with GPUs
    if sys.platform.startswith("linux"):
        env["GLOO_SOCKET_IFNAME"] = "lo"  # gloo on 127.0.0.1 only
    env[_TAG] = tag
    for key, value in (extra or {}).items():  # None: leave the variable out
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _tagged(tag: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get(_TAG) == tag:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill(procs: list[psutil.Process]) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=10)
