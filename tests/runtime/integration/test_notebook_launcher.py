"""notebook_launcher for real: 2 worker processes on gloo and 127.0.0.1, the Accelerator
inside them, a failing rank's error raised in the caller, and no process left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

pytest.importorskip("torch")

from runtime import Accelerator, notebook_launcher  # noqa: E402
from runtime.notebook import WorkerFailedError, start_method, worker_env  # noqa: E402
from runtime.process import ENV_MASTER_ADDR, ENV_MASTER_PORT, ENV_RANK, ENV_WORLD_SIZE  # noqa: E402

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[3]


def _train(out: str) -> None:
    """A tiny training step on each rank; writes what this rank saw."""
    import torch

    accelerator = Accelerator(cpu=True)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    loss = model(torch.full((4, 2), float(accelerator.process_index + 1))).sum()
    accelerator.backward(loss)
    optimizer.step()
    total = accelerator.reduce(torch.tensor([accelerator.process_index + 1.0]), "sum")
    weight = accelerator.unwrap_model(model).weight.detach().flatten().tolist()
    Path(out, f"rank{accelerator.process_index}.txt").write_text(
        f"{accelerator.num_processes} {accelerator.distributed_type.value} {total.item()} {weight}"
    )


def _fail_on_rank_one() -> None:
    accelerator = Accelerator(cpu=True)
    if accelerator.process_index == 1:
        raise ValueError("boom on rank 1")
    accelerator.wait_for_everyone()  # rank 0 waits for rank 1, which never comes


def _exit_on_rank_zero() -> None:
    if int(os.environ[ENV_RANK]) == 0:
        sys.exit(3)


def _no_new_children(before: set[int]) -> list[int]:
    return [c.pid for c in psutil.Process().children(recursive=True) if c.pid not in before and c.status() != psutil.STATUS_ZOMBIE]


def _children() -> set[int]:
    return {c.pid for c in psutil.Process().children(recursive=True)}


def test_two_processes_train_with_the_accelerator_inside(tmp_path):
    before = _children()
    notebook_launcher(_train, args=(str(tmp_path),), num_processes=2)
    seen = [(tmp_path / f"rank{r}.txt").read_text().split(" ", 3) for r in (0, 1)]
    assert [s[:3] for s in seen] == [["2", "MULTI_CPU", "3.0"]] * 2
    assert seen[0][3] == seen[1][3], "DDP must leave the same weights on every rank"
    assert not _no_new_children(before)


def test_a_failing_rank_raises_its_error_in_the_caller(tmp_path):
    before = _children()
    with pytest.raises(WorkerFailedError) as info:
        notebook_launcher(_fail_on_rank_one, num_processes=2)
    error = info.value
    assert error.rank == 1 and error.exit_code == 1
    message = str(error)
    assert message.startswith("rank 1 of 2 failed:")
    assert "ValueError: boom on rank 1" in message
    assert 'raise ValueError("boom on rank 1")' in message
    assert "_Worker" not in message, "the traceback starts at the user's function"
    assert not _no_new_children(before)


def test_sys_exit_with_a_code_is_a_failure():
    with pytest.raises(WorkerFailedError, match="rank 0 of 2 failed") as info:
        notebook_launcher(_exit_on_rank_zero, num_processes=2, cpu=True)
    assert info.value.exit_code == 3


def test_one_process_runs_in_this_process(tmp_path):
    calls = []
    notebook_launcher(calls.append, args=("here",), num_processes=1, cpu=True)
    assert calls == ["here"]


def test_a_function_defined_in_main_works_as_in_a_notebook(tmp_path):
    """A notebook's functions live in __main__ and cannot be imported by a spawned worker;
    with fork they need not be."""
    if start_method() != "fork":
        pytest.skip("spawn: notebook functions must be importable")
    code = textwrap.dedent(
        f"""
        from pathlib import Path
        from runtime import Accelerator, notebook_launcher

        def training_function(out):
            accelerator = Accelerator(cpu=True)
            Path(out, str(accelerator.process_index)).write_text(str(accelerator.num_processes))

        notebook_launcher(training_function, args=({str(tmp_path)!r},), num_processes=2)
        print("done")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k not in (ENV_RANK, ENV_WORLD_SIZE)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("done")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0", "1"]
    assert (tmp_path / "1").read_text() == "2"


@pytest.mark.parametrize("kwargs, words", [
    ({"num_processes": 0}, "at least 1"),
    ({"num_processes": 2, "mixed_precision": "fp8"}, "mixed_precision"),
])
def test_bad_arguments_are_refused_before_anything_starts(kwargs, words):
    with pytest.raises(ValueError, match=words):
        notebook_launcher(print, **kwargs)


def test_worker_env_is_what_torchrun_sets():
    env = worker_env(1, 2, 29555)
    assert env[ENV_RANK] == "1" and env[ENV_WORLD_SIZE] == "2"
    assert env[ENV_MASTER_ADDR] == "127.0.0.1" and env[ENV_MASTER_PORT] == "29555"
