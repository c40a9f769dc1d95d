"""With 2 real processes: a model whose buffer is a transposed view trains (DDP's buffer
broadcast copies into the buffer, which fails for such a view unless prepare() gives it
standard strides), and the buffer keeps its values."""

from __future__ import annotations

from tests.runtime.integration.harness import launch_args, run


def test_a_buffer_made_by_transposing_a_view_survives_the_ddp_broadcast(tmp_path):
    import torch

    run(launch_args("strided_buffer.py", "--out", str(tmp_path)), cwd=tmp_path, timeout=120).check()
    result = torch.load(tmp_path / "result.pt", weights_only=True)
    assert result["steps"] == 3  # 24 samples, batches of 4, split over 2 processes
    expected = (torch.arange(40, dtype=torch.float32).reshape(10, 4) / 40).unsqueeze(1)
    assert torch.equal(result["pe"], expected)
