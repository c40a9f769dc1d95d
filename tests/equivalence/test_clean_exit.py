"""A migrated script that finishes exits 0 on every rank under accel-launch.

Migrated scripts rarely call `accelerator.end_training()`. Gloo's worker thread frees a
finished collective itself and needs the GIL for it; when that happens during interpreter
finalisation the rank abort()s ("terminate called without an active exception", SIGABRT;
core dump: ProcessGroupGloo::runLoop -> ~AsyncWork -> gil_scoped_acquire -> pthread_exit).
It made about 1 in 15 two-process runs fail. The worker wrapper now leaves the group once
the script returns (barrier, destroy, a moment without the GIL), before the teardown.
"""

from __future__ import annotations

from tests.equivalence import runner

SCRIPT = runner.REPO / "tests" / "equivalence" / "scripts" / "group_at_exit.py"


def test_the_process_group_is_gone_before_interpreter_teardown(tmp_path):
    run = runner.run(runner.accel_launch_cmd(SCRIPT, [], 2), tmp_path, timeout=180)
    assert run.returncode == 0, run.output[-3000:]
    for rank in (0, 1):
        assert f"rank {rank} group alive at exit: False" in run.output, run.output[-3000:]
