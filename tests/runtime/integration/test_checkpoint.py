"""save_state / load_state across process lifetimes: resuming loses and repeats nothing."""

from __future__ import annotations

from tests.runtime.integration.conftest import assert_params_close
from tests.runtime.integration.harness import launch_args, run


def test_resumed_run_in_new_processes_equals_uninterrupted_run(tmp_path):
    run(launch_args("checkpoint_resume.py", "--mode", "full", "--out", str(tmp_path)), cwd=tmp_path).check()
    assert (tmp_path / "state" / "rng_state_1.pt").exists(), "every process must save its own RNG state"
    run(launch_args("checkpoint_resume.py", "--mode", "resume", "--out", str(tmp_path)), cwd=tmp_path).check()
    from safetensors.torch import load_file

    full = load_file(tmp_path / "full" / "model.safetensors")
    resumed = load_file(tmp_path / "resume" / "model.safetensors")
    assert_params_close(resumed, full, "resumed vs uninterrupted run", atol=1e-7)
