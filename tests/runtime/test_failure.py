"""runtime/launch/failure.py: choosing and describing the failed rank from torchrun's report."""

from __future__ import annotations

from dataclasses import dataclass, field

from runtime.launch.failure import TAIL_LINES, describe_failure


@dataclass
class Failure:
    """The fields of torchrun's ProcessFailure that the report reads."""

    exitcode: int
    timestamp: int = 100
    error_file_data: dict = field(default_factory=dict)
    message: str = ""


def recorded(text: str, raised_at_ns: int) -> dict:
    callstack = "Traceback (most recent call last):\n" + "".join(f'  File "t.py", line {i}, in f\n    x()\n' for i in range(5))
    return {"message": {"message": text, "extraInfo": {"py_callstack": callstack + text + "\n", "raised_at_ns": str(raised_at_ns)}}}


def test_the_earliest_recorded_exception_is_the_root_cause():
    failures = {
        0: Failure(1, error_file_data=recorded("RuntimeError: Connection closed by peer", 2_000)),
        1: Failure(1, error_file_data=recorded("ValueError: bad batch", 1_000)),
        2: Failure(-15, message="Signal 15 (SIGTERM) received by PID 7"),
    }
    report = describe_failure(failures)
    assert report.rank == 1 and report.exit_code == 1
    assert report.lines[-1] == "ValueError: bad batch" and len(report.lines) == TAIL_LINES
    assert report.also_failed == ("rank 0 (RuntimeError)",), "ranks stopped by torchrun are not listed"
    assert report.message.startswith("accel-launch: rank 1 failed:\n")
    assert "the other processes were stopped" in report.message


def test_a_crash_outranks_a_plain_exit_code_and_a_stopped_rank():
    failures = {0: Failure(-15), 1: Failure(-11), 2: Failure(3)}
    report = describe_failure(failures)
    assert report.rank == 1 and report.exit_code == 1
    assert report.lines == ("killed by SIGSEGV",)


def test_an_exit_code_without_a_traceback_is_reported_as_such():
    report = describe_failure({0: Failure(-15), 1: Failure(3)})
    assert (report.rank, report.exit_code, report.lines) == (1, 3, ("exit code 3",))


def test_no_failures_still_gives_a_message():
    assert describe_failure({}).exit_code == 1


def test_a_worker_s_error_file_is_replaced_whole(tmp_path, monkeypatch):
    """The error file torchrun parses is written aside and moved into place: a worker stopped
    while writing it (the others are sent SIGTERM when one rank fails) left an empty file
    once, and accel-launch died on torchrun's JSONDecodeError instead of naming the rank.
    An earlier report in place is replaced, never truncated first."""
    import json

    from runtime.launch import child
    from runtime.process import ENV_ERROR_FILE

    path = tmp_path / "error.json"
    path.write_text('{"message": {"message": "earlier"}}')
    monkeypatch.setenv(ENV_ERROR_FILE, str(path))
    writes = []
    real_open = open

    def watching(name, mode="r", *args, **kwargs):
        writes.append((str(name), mode))
        return real_open(name, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", watching)
    child._record(RuntimeError("boom"), None)
    assert json.loads(path.read_text())["message"]["message"] == "RuntimeError: boom"
    assert (str(path), "w") not in writes and [p for p in tmp_path.iterdir()] == [path]
