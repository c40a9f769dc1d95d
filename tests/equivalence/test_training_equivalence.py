"""A migrated script trains like the original (DESIGN.md), for every fixture that trains.

Every fixture whose case.toml has a `[train]` table (tests/equivalence/training_cases.py)
is run for real: 1 process must print the original's losses; 2 processes must match the
original at twice the batch, and follow its learning-rate schedule over the run. The
reasoning behind the 2-process comparison is in tests/equivalence/harness.py.
"""

from __future__ import annotations

import math

import pytest

from migrator.config import Target
from tests.equivalence import harness, runner
from tests.equivalence.training_cases import training_cases
from tests.fixture_cases import cases

SPECS = training_cases()
IDS = [spec.name for spec in SPECS]

pytestmark = pytest.mark.timeout(900)


def test_training_fixtures_are_declared():
    """e2e-train-* fixtures exist to be run: each must say how ([train] in case.toml)."""
    declared = {spec.name for spec in SPECS}
    missing = [case.name for case in cases() if case.name.startswith("e2e-train-") and case.name not in declared]
    assert not missing, f"training fixtures without a [train] table in case.toml: {missing}"
    assert len(SPECS) >= 5, f"only {len(SPECS)} fixtures declare [train]"


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_one_process_prints_the_original_losses(spec):
    expected = harness.original(spec, spec.batch).steps
    run = harness.migrated(spec, spec.target, 1)
    harness.assert_same_run(run.steps, expected, f"{spec.name}: migrated ({spec.target.value}), 1 process")


def _known_bug(spec):
    if not spec.known_bug:
        return spec
    return pytest.param(spec, marks=pytest.mark.xfail(reason=spec.known_bug, strict=True))


@pytest.mark.parametrize("spec", [_known_bug(spec) for spec in SPECS], ids=IDS)
def test_two_processes_train_as_the_original_at_twice_the_batch(spec):
    nproc = harness.NPROC
    run = harness.migrated(spec, spec.target, nproc)
    single = harness.original(spec, spec.batch).steps
    what = f"{spec.name}: migrated ({spec.target.value}), {nproc} processes"
    if spec.unsharded:
        # No loader to shard: every process trains on all the data, with the same gradients
        # (their mean is each one's own), so every rank prints the original's run at B.
        assert sorted(run.ranks) == list(range(nproc)), f"{what}: ranks {sorted(run.ranks)}"
        for rank, steps in run.ranks.items():
            harness.assert_same_run(steps, single, f"{what}, rank {rank} vs the original at B")
        return
    if spec.global_batch:
        # The script splits the batch it is given between its processes (as the original
        # split it between its spawned workers): N processes at B take the original's
        # batches at B, a share each, step for step.
        harness.assert_matches_global_batch(run.ranks, single, f"{what} (the batch is the whole run's)")
        return
    harness.assert_schedule_over_run(spec, run.steps, single, what)
    if spec.why:
        # The run cannot equal the original at N*B (the fixture says why); what still holds:
        # every rank trains the same number of steps with the same lr, and the loss is finite.
        lengths = {rank: len(steps) for rank, steps in run.ranks.items()}
        assert sorted(lengths) == list(range(nproc)) and len(set(lengths.values())) == 1, lengths
        for steps in zip(*run.ranks.values()):
            for step in steps:
                harness.assert_same_lr(step, steps[0], f"{what}: lr differs between ranks")
                assert math.isfinite(step.loss), f"{what}: loss {step.loss}"
        return
    reference = harness.original(spec, nproc * spec.batch, reference=True).steps
    harness.assert_matches_global_batch(run.ranks, reference, what)


METRICS = [spec for spec in SPECS if spec.metrics]


@pytest.mark.parametrize("spec", METRICS, ids=[spec.name for spec in METRICS])
def test_evaluation_metrics_count_every_process(spec):
    """A fixture's evaluation lines (its `metrics` pattern): on 1 process the original's;
    on N processes, on every rank, the original's at N times the batch, which trains the
    same steps and evaluates the same data: gathered and reduced metrics cover every
    process's samples, once."""
    nproc = harness.NPROC
    for run, reference, what in (
        (harness.migrated(spec, spec.target, 1), harness.original(spec, spec.batch), "1 process"),
        (harness.migrated(spec, spec.target, nproc), harness.original(spec, nproc * spec.batch, reference=True), f"{nproc} processes"),
    ):
        expected = runner.parse_metrics(reference.output, spec.metrics)[0]
        ranks = runner.parse_metrics(run.output, spec.metrics)
        assert expected, f"{spec.name}: the original printed no line matching {spec.metrics!r}"
        assert sorted(ranks) == list(range(len(ranks))) and ranks, f"{spec.name}, {what}: metric lines per rank {sorted(ranks)}"
        for rank, lines in ranks.items():
            assert len(lines) == len(expected), f"{spec.name}, {what}, rank {rank}: {len(lines)} evaluations, expected {len(expected)}"
            for got, want in zip(lines, expected):
                for key, value in want.items():
                    assert got[key] == pytest.approx(value, rel=1e-4, abs=2e-6), f"{spec.name}, {what}, rank {rank}: {key} {got} vs {want}"


ACCELERATE = [(spec, n) for spec in SPECS for n in spec.accelerate]


@pytest.mark.parametrize("spec, nproc", ACCELERATE, ids=[f"{s.name}-{n}proc" for s, n in ACCELERATE])
def test_hugging_face_accelerate_prints_the_same_losses(spec, nproc):
    """The same fixture migrated with --target accelerate, under Hugging Face Accelerate,
    prints what our runtime prints (which the tests above tie to the original)."""
    pytest.importorskip("accelerate")
    ours = harness.migrated(spec, Target.RUNTIME, nproc)
    theirs = harness.migrated(spec, Target.ACCELERATE, nproc)
    what = f"{spec.name}: Hugging Face Accelerate vs our runtime, {nproc} process(es)"
    assert sorted(theirs.ranks) == sorted(ours.ranks), f"{what}: ranks {sorted(theirs.ranks)} vs {sorted(ours.ranks)}"
    for rank in ours.ranks:
        harness.assert_same_run(theirs.ranks[rank], ours.ranks[rank], f"{what}, rank {rank}")
