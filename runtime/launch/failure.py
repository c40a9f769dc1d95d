"""Turns torchrun's ChildFailedError into a few lines: which rank failed, and its last error lines.

Each worker records its uncaught exception in torchrun's error file (launch/child.py);
this module only reads what was recorded.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any, Mapping

# Lines of the failed rank's traceback shown: enough for the raising line and the error.
TAIL_LINES = 4
# Signals torchrun sends to stop the other workers once one has failed.
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}


@dataclass(frozen=True)
class FailureReport:
    """What accel-launch prints and returns when a rank fails."""

    rank: int
    exit_code: int
    lines: tuple[str, ...]
    also_failed: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        text = f"accel-launch: rank {self.rank} failed:" + "".join(f"\n    {line}" for line in self.lines)
        if self.also_failed:
            text += f"\naccel-launch: also failed: {', '.join(self.also_failed)}"
        return text + "\naccel-launch: the other processes were stopped."


def describe_failure(failures: Mapping[int, Any]) -> FailureReport:
    """Pick the root cause among torchrun's ProcessFailures (keyed by global rank).

    First the earliest recorded exception (a rank's error makes the others fail after it),
    then a crash by signal, then any other exit code; ranks torchrun itself stopped come last.
    """
    if not failures:
        return FailureReport(rank=-1, exit_code=1, lines=("a worker failed but torchrun reported no details",))
    ranked = sorted(failures.items(), key=lambda item: (*_cause_order(item[1]), item[0]))
    rank, failure = ranked[0]
    others = tuple(
        f"rank {other} ({_short(f)})" for other, f in ranked[1:] if _cause_order(f)[0] < _STOPPED
    )
    exit_code = failure.exitcode if failure.exitcode > 0 else 1
    return FailureReport(rank=rank, exit_code=exit_code, lines=_error_lines(failure), also_failed=others)


_RECORDED, _CRASHED, _EXITED, _STOPPED = range(4)


def _cause_order(failure: Any) -> tuple[int, int]:
    raised_at = _recorded(failure).get("extraInfo", {}).get("raised_at_ns")
    if raised_at is not None:
        return (_RECORDED, int(raised_at))
    if failure.exitcode < 0:
        stopped = _signal(failure.exitcode) in _STOP_SIGNALS
        return (_STOPPED if stopped else _CRASHED, int(failure.timestamp or 0))
    return (_EXITED, int(failure.timestamp or 0))


def _recorded(failure: Any) -> dict[str, Any]:
    data = failure.error_file_data if isinstance(failure.error_file_data, dict) else {}
    message = data.get("message")
    return message if isinstance(message, dict) else {}


def _error_lines(failure: Any) -> tuple[str, ...]:
    recorded = _recorded(failure)
    callstack = recorded.get("extraInfo", {}).get("py_callstack") or ""
    lines = [line for line in callstack.rstrip().splitlines() if line.strip()]
    if lines:
        return tuple(lines[-TAIL_LINES:])
    if recorded.get("message"):
        return (str(recorded["message"]),)
    return (_short(failure),)


def _short(failure: Any) -> str:
    if failure.exitcode < 0:
        return f"killed by {_signal(failure.exitcode).name}"
    recorded = str(_recorded(failure).get("message") or "")
    # "RuntimeError: long text..." -> "RuntimeError": the details belong to that rank's output.
    return recorded.split(":", 1)[0] if recorded else f"exit code {failure.exitcode}"


def _signal(exitcode: int) -> signal.Signals:
    try:
        return signal.Signals(-exitcode)
    except ValueError:
        return signal.SIGTERM
