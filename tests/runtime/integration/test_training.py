"""Training through the runtime: N processes equal one process with an N-times batch.

One plain-python run and one 2-process accel-launch run of scripts/train_equivalence.py
are shared by the tests below (each run checks several things, to save CPU).
"""

from __future__ import annotations

import pytest

from tests.runtime.integration.conftest import assert_params_close
from tests.runtime.integration.harness import launch_args, python_args, run


def _result(path):
    import torch

    return torch.load(path / "result.pt", weights_only=False)


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """`python train_equivalence.py`: no launcher, no environment, one process at batch 2B."""
    out = tmp_path_factory.mktemp("single")
    run(python_args("train_equivalence.py", "--out", str(out)), cwd=out).check()
    return _result(out)


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """`accel-launch --nproc-per-node 2 train_equivalence.py`: two processes at batch B each."""
    out = tmp_path_factory.mktemp("launched")
    run(launch_args("train_equivalence.py", "--out", str(out)), cwd=out).check()
    return _result(out)


def test_plain_python_runs_as_one_process_and_trains_like_raw_torch(single, reference_params):
    assert single["num_processes"] == 1
    assert single["distributed_type"] == "NO"
    assert_params_close(single["plain"], reference_params, "plain python through the runtime vs raw torch", atol=1e-6)


def test_two_processes_at_batch_b_equal_one_process_at_batch_2b(launched, reference_params):
    assert launched["num_processes"] == 2
    assert launched["distributed_type"] == "MULTI_CPU"
    assert_params_close(launched["plain"], reference_params, "2 processes at B vs 1 process at 2B")


def test_accumulation_equals_large_batch_training(single, launched, reference_params):
    # The script itself asserted that gradients were synchronised only on the last micro step.
    assert_params_close(single["accumulated"], reference_params, "1 process, 2 micro steps vs 1 large batch")
    assert_params_close(launched["accumulated"], reference_params, "2 processes, 2 micro steps vs 1 large batch")


def test_learning_rate_follows_samples_consumed_on_two_processes(single, launched):
    one = {row[0]: row[1:] for row in single["schedules"]}
    two = {row[0]: row[1:] for row in launched["schedules"]}
    assert two, "the 2-process run recorded no schedule"
    cases = ("prepared per-batch scheduler", "scheduler sized from len(dataloader)", "per-epoch scheduler")
    for samples, lrs in two.items():
        assert samples in one, f"1-process run has no step at {samples} samples"
        for case, lr_two, lr_one in zip(cases, lrs, one[samples]):
            assert lr_two == pytest.approx(lr_one, rel=1e-9), f"{case}: at {samples} samples LR {lr_two} != {lr_one}"
    assert max(two) == max(one), "both runs must consume the same data"


def test_bf16_autocast_runs_on_cpu(single):
    bf16 = single["bf16"]
    assert bf16["name"] == "bf16"
    assert bf16["inner"] == "torch.bfloat16", "the prepared model's layers must compute in bf16"
    assert bf16["output"] == "torch.float32", "the prepared model must return float32, as Accelerate does"
    assert bf16["autocast"] == "torch.bfloat16", "accelerator.autocast() must autocast to bf16"
