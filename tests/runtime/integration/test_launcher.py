"""accel-launch as a process manager: a failing rank, Ctrl-C, several nodes."""

from __future__ import annotations

import signal
import threading
import time

from tests.runtime.integration.conftest import assert_params_close
from tests.runtime.integration.harness import (
    launch_args,
    run,
    started,
    surviving,
)


def test_failing_rank_stops_the_job_and_is_named(tmp_path):
    begin = time.monotonic()
    result = run(launch_args("fail_or_hang.py", "--out", str(tmp_path), "--fail-rank", "1"), cwd=tmp_path, timeout=90)
    elapsed = time.monotonic() - begin
    assert result.returncode != 0, f"accel-launch must fail when a rank fails:\n{result.output}"
    summary = result.output[result.output.find("accel-launch: rank") :]
    assert summary.startswith("accel-launch: rank 1 failed"), f"the failed rank must be named:\n{result.output[-3000:]}"
    assert "RuntimeError: deliberate failure on rank 1" in summary, f"its error must be shown:\n{summary}"
    assert len(summary.splitlines()) <= 10, f"the summary must be short:\n{summary}"
    assert not result.leftovers, f"processes outlived accel-launch: {result.leftovers}"
    assert elapsed < 45, f"accel-launch took {elapsed:.0f}s to give up"


def test_ctrl_c_stops_every_process(tmp_path):
    with started(launch_args("fail_or_hang.py", "--out", str(tmp_path), "--hang"), cwd=tmp_path) as proc:
        deadline = time.monotonic() + 90
        while len(list(tmp_path.glob("ready_*"))) < 2:
            assert proc.poll() is None, f"accel-launch exited early:\n{proc.communicate()[0]}"
            assert time.monotonic() < deadline, "the ranks never became ready"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGINT, f"exit status {proc.returncode}:\n{output[-3000:]}"
        assert not surviving(proc), f"processes outlived Ctrl-C: {surviving(proc)}"


def test_two_launchers_with_nnodes_2_form_one_job(tmp_path, reference_params):
    import torch

    from runtime.launch.command import find_free_port

    port = str(find_free_port())
    nodes = []
    for node in (0, 1):
        out = tmp_path / f"node{node}"
        out.mkdir()
        extra = ["--nnodes", "2", "--node-rank", str(node), "--master-addr", "127.0.0.1", "--master-port", port]
        nodes.append(started(launch_args("train_equivalence.py", "--out", str(out), nproc=1, extra=extra), cwd=out))
    with nodes[0] as first, nodes[1] as second:
        outputs = _wait_together((first, second), timeout=180)
        for node, proc in enumerate((first, second)):
            assert proc.returncode == 0, f"node {node} failed (exit {proc.returncode}):\n" + _both(outputs)
            assert not surviving(proc), f"node {node} left processes behind"
    result = torch.load(tmp_path / "node0" / "result.pt", weights_only=False)
    assert result["num_processes"] == 2, "the two launchers must form one 2-process job"
    assert not (tmp_path / "node1" / "result.pt").exists(), "only the global main process writes"
    assert_params_close(result["plain"], reference_params, "2 nodes x 1 process vs 1 process at 2B")


def _wait_together(procs, timeout: float) -> list[str]:
    """Read every node's output at once; when one node fails (or time runs out), stop the
    others instead of waiting on them, so the failure shows every node's output."""
    outputs = [""] * len(procs)

    def read(i: int) -> None:
        outputs[i] = procs[i].communicate()[0]

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(len(procs))]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        if any(p.poll() not in (None, 0) for p in procs):
            break
        time.sleep(0.2)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)  # accel-launch tears its workers down on Ctrl-C
    for reader in readers:
        reader.join(timeout=60)
    return outputs


def _both(outputs: list[str]) -> str:
    return "\n".join(f"--- node {i} ---\n{out[-3000:]}" for i, out in enumerate(outputs))
