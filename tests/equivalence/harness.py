"""The runs the equivalence tests compare, made once per session, and the comparisons.

Runs of one fixture (B = its `[train] batch`, N = 2):

* original at B (`python input.py`): the reference for 1 process and for the lr schedule;
* migrated at B, 1 process (`python migrated.py`): must print the original's losses;
* original at N*B: the reference for N processes ("the equivalent global batch");
* migrated at B per process, N processes (`accel-launch --nproc-per-node N`).

Why N processes at B equal the original at N*B, step by step: the prepared loader shards
whole batches (process r takes batch r of every round of N) of the same epoch permutation
the original draws (tests/equivalence/test_shuffle_order.py), so step k's N local batches
together are the original's batch k at N*B. DDP averages the N local gradients; with
mean-reduced losses and equal local batches that average is the gradient of the N*B batch.
Parameters being equal at step k, the mean of the N local losses printed at step k is the
loss the original prints at N*B. The learning rate is compared twice: against the original
at N*B step by step (required for the losses to match), and against the original at B as a
function of the data consumed (N*B samples per step): the schedule over the run.

Every rank must print its local loss, so for N processes `accelerator.print(` (the migrator
turns a training loop's print into it) is turned back into `print(`; nothing else changes.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import math
import re
import shutil
import tempfile
from pathlib import Path

from migrator.api import migrate_source
from migrator.config import Target
from migrator.findings import FileStatus
from tests.equivalence import runner
from tests.equivalence.runner import Run, Step
from tests.equivalence.training_cases import TrainSpec
from tests.fixture_cases import case_config

NPROC = 2
ONE_PROCESS_ATOL = 1e-6  # the same operations in the same order: equal up to printing
N_PROCESS_ATOL = 1e-5  # all-reduce sums in another order: float32 rounding, amplified a little by training
LR_RTOL = 1e-6
TIMEOUT_1 = 180.0
TIMEOUT_N = 300.0

_ACCELERATOR_PRINT = re.compile(r"\b[\w.]*accelerator\.print\(")


@functools.cache
def workdir() -> Path:
    """One folder for the session's migrated scripts (and the runs' working directory)."""
    path = Path(tempfile.mkdtemp(prefix="accel-equivalence-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def migrated_source(spec: TrainSpec, target: Target) -> str:
    """The fixture migrated as its snapshot test migrates it, for `target`."""
    config = dataclasses.replace(case_config(spec.case), target=target)
    result = migrate_source((spec.case / "input.py").read_bytes(), "input.py", config)
    assert result.status is not FileStatus.FAILED, result.error
    return result.after


def every_rank_prints(source: str) -> str:
    """`accelerator.print(` -> `print(`, so each process reports its own local loss."""
    return _ACCELERATOR_PRINT.sub("print(", source)


def _write(spec: TrainSpec, name: str, text: str) -> Path:
    folder = workdir() / spec.name
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def _fresh(spec: TrainSpec, label: str) -> Path:
    """A working directory of its own for one run, so what a run writes (a snapshot it
    resumes from) never reaches another."""
    folder = workdir() / spec.name / label
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@functools.cache
def original(spec: TrainSpec, batch: int, reference: bool = False) -> Run:
    script = spec.case / "input.py"
    args = spec.argv(batch, reference)
    command = runner.torchrun_cmd(script, args) if spec.launch == "torchrun" else runner.python_cmd(script, args)
    cwd = _fresh(spec, f"original-{batch}{'-reference' if reference else ''}")
    return runner.run(command, cwd, TIMEOUT_1, runner.GPU_ON_CPU_ENV, spec.pattern).check()


@functools.cache
def migrated(spec: TrainSpec, target: Target, nproc: int) -> Run:
    """The migrated fixture on `nproc` processes under `target`'s own launcher."""
    source = migrated_source(spec, target)
    if nproc == 1:
        script = _write(spec, f"migrated_{target.value}.py", source)
        cwd = _fresh(spec, f"{target.value}-1")
        return runner.run(runner.python_cmd(script, spec.argv(spec.batch)), cwd, TIMEOUT_1, None, spec.pattern).check()
    script = _write(spec, f"migrated_{target.value}_every_rank.py", every_rank_prints(source))
    args = spec.argv(spec.batch)
    if target is Target.RUNTIME:
        command, env = runner.accel_launch_cmd(script, args, nproc), runner.TEE_ENV
        return runner.run(command, _fresh(spec, f"{target.value}-{nproc}"), TIMEOUT_N, env, spec.pattern).check()
    run = runner.run(runner.accelerate_launch_cmd(script, args, nproc), _fresh(spec, f"{target.value}-{nproc}"), TIMEOUT_N, runner.ACCELERATE_ENV, spec.pattern)
    for _ in range(_TEARDOWN_RETRIES):
        if run.returncode == 0 or _TEARDOWN_ABORT not in run.output:
            break
        # gloo aborting a finished rank at interpreter teardown under Accelerate's launcher
        # (leave_group_at_exit/ narrows it, pytorch/pytorch#179291): run it again; a fresh
        # clone's CI saw it twice in a row once (2026-11-27), on a loaded machine
        command = runner.accelerate_launch_cmd(script, args, nproc)
        run = runner.run(command, _fresh(spec, f"{target.value}-{nproc}"), TIMEOUT_N, runner.ACCELERATE_ENV, spec.pattern)
    return run.check()


_TEARDOWN_ABORT = "terminate called without an active exception"
_TEARDOWN_RETRIES = 3


# -- comparisons ----------------------------------------------------------------------------


def assert_same_run(actual: list[Step], expected: list[Step], what: str, atol: float = ONE_PROCESS_ATOL) -> None:
    """Step for step: the same labels, losses within `atol` (plus printing), the same lr."""
    assert len(actual) == len(expected), f"{what}: {len(actual)} steps printed, expected {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected)):
        assert (a.epoch, a.step) == (e.epoch, e.step), f"{what}: step {k} labelled {a.epoch, a.step}, expected {e.epoch, e.step}"
        tol = atol + min(a.loss_ulp, e.loss_ulp)
        assert runner.close(a.loss, e.loss, tol), (
            f"{what}: loss at step {k} (epoch {e.epoch}, step {e.step}) is {a.loss!r}, expected {e.loss!r} (atol {tol:g})"
            f"\n{_table(actual, expected, k)}"
        )
        assert_same_lr(a, e, f"{what}: lr at step {k}")


def assert_same_lr(a: Step, e: Step, what: str) -> None:
    if a.lr is None and e.lr is None:
        return  # a fixture of another's that prints no lr: nothing to compare
    assert a.lr is not None and e.lr is not None, f"{what}: lr printed by one run only"
    tol = LR_RTOL * abs(e.lr) + min(a.lr_ulp, e.lr_ulp)
    assert runner.close(a.lr, e.lr, tol), f"{what} is {a.lr!r}, expected {e.lr!r}"


def assert_matches_global_batch(ranks: dict[int, list[Step]], reference: list[Step], what: str) -> None:
    """Mean over ranks of step k's local loss == the original's loss at N*B, step k."""
    assert sorted(ranks) == list(range(NPROC)), f"{what}: ranks {sorted(ranks)} printed, expected {NPROC}"
    merged = []
    for k, steps in enumerate(zip(*ranks.values())):
        for s in steps[1:]:
            assert_same_lr(s, steps[0], f"{what}: lr at step {k} differs between ranks")
        mean = math.fsum(s.loss for s in steps) / len(steps)
        merged.append(Step(mean, steps[0].lr, steps[0].epoch, steps[0].step, max(s.loss_ulp for s in steps), steps[0].lr_ulp))
    assert all(len(s) == len(reference) for s in ranks.values()), (
        f"{what}: steps per rank {[len(s) for s in ranks.values()]}, the original at {NPROC}x batch made {len(reference)}"
    )
    assert_same_run(merged, reference, f"{what} (mean over ranks) vs the original at {NPROC}x batch", N_PROCESS_ATOL)


def assert_schedule_over_run(spec: TrainSpec, steps: list[Step], single: list[Step], what: str) -> None:
    """lr at N-process step k == the original's at B after the same data: its step N*k (+N-1
    when lr is printed after scheduler.step()); exact, or within lr_tolerance of the peak."""
    assert len(single) == NPROC * len(steps), (
        f"{what}: {len(steps)} steps on {NPROC} processes, but the original at B made {len(single)} "
        f"(each {NPROC}-process step should consume {NPROC} of its batches)"
    )
    offset = NPROC - 1 if spec.lr_after_step else 0
    if all(s.lr is None for s in single):
        return
    peak = max(abs(s.lr) for s in single)
    for k, step in enumerate(steps):
        e = single[NPROC * k + offset]
        if spec.lr_tolerance is None:
            assert_same_lr(step, e, f"{what}: lr at step {k} vs the original's step {NPROC * k + offset}")
        else:
            assert abs(step.lr - e.lr) <= spec.lr_tolerance * peak + step.lr_ulp, (
                f"{what}: lr at step {k} is {step.lr}, the original's at step {NPROC * k + offset} is {e.lr} "
                f"(tolerance {spec.lr_tolerance} x peak {peak})"
            )


def _table(actual: list[Step], expected: list[Step], around: int) -> str:
    rows = [f"  {k:>3}  {a.loss:>12.7f}  {e.loss:>12.7f}  {a.lr}  {e.lr}" for k, (a, e) in enumerate(zip(actual, expected))]
    return "  step  actual loss   expected      lr  expected lr\n" + "\n".join(rows[max(0, around - 3) : around + 4])
