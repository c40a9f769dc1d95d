"""A migrated script that finishes exits 0 on every rank under accel-launch.

Migrated scripts rarely call `accelerator.end_training()`. A gloo process group still alive
at interpreter teardown can abort() a finished rank ("terminate called without an active
exception", SIGABRT) now and then, which made 2-process equivalence runs flaky; the worker
wrapper leaves the group once the script returns, before the interpreter tears down.
"""

from __future__ import annotations

from tests.equivalence import runner

SCRIPT = runner.REPO / "tests" / "equivalence" / "scripts" / "group_at_exit.py"


def test_the_process_group_is_gone_before_interpreter_teardown(tmp_path):
    run = runner.run(runner.accel_launch_cmd(SCRIPT, [], 2), tmp_path, timeout=180)
    assert run.returncode == 0, run.output[-3000:]
    for rank in (0, 1):
        assert f"rank {rank} group alive at exit: False" in run.output, run.output[-3000:]
