"""With 2 real processes: `kwargs_handlers=[DistributedDataParallelKwargs(...)]` reaches the
DDP wrap. A model with a submodule the loss never reads trains with
`find_unused_parameters=True`, and stops with DDP's own error without it."""

from __future__ import annotations

from tests.runtime.integration.harness import launch_args, run


def test_a_model_with_an_unused_submodule_trains_with_find_unused_parameters(tmp_path):
    import torch

    run(launch_args("unused_parameters.py", "--out", str(tmp_path), "--find-unused"), cwd=tmp_path, timeout=120).check()
    result = torch.load(tmp_path / "result.pt", weights_only=True)
    assert result["find_unused"] is True
    assert result["steps"] == 3  # 24 samples, batches of 4, split over 2 processes


def test_without_the_option_ddp_stops_at_the_second_step(tmp_path):
    failed = run(launch_args("unused_parameters.py", "--out", str(tmp_path)), cwd=tmp_path, timeout=120)
    assert failed.returncode != 0, failed.output[-3000:]
    assert "find_unused_parameters=True" in failed.output, failed.output[-3000:]
    assert "step 1 done" in failed.output and "step 2 done" not in failed.output
    assert not failed.leftovers, failed.leftovers
    assert not (tmp_path / "result.pt").exists()
