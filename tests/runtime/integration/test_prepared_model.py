"""With 2 real processes: the prepared model answers for the user's module, gradients stay in
sync, and save_model writes sharded safetensors from rank 0 only."""

from __future__ import annotations

import json

from tests.runtime.integration.conftest import assert_params_close
from tests.runtime.integration.harness import launch_args, run


def test_user_attributes_through_prepared_model_and_save_model_on_rank_0(tmp_path):
    import torch
    from safetensors.torch import load_file

    run(launch_args("prepared_model.py", "--out", str(tmp_path)), cwd=tmp_path).check()
    result = torch.load(tmp_path / "result.pt", weights_only=True)
    assert result["checks"] == dict.fromkeys(result["checks"], True), result["checks"]
    assert {"is_ddp", "config", "method", "head_is_users", "grads_equal"} <= result["checks"].keys()
    assert not (tmp_path / "saved_by_rank1").exists(), "only the main process writes"
    saved = tmp_path / "saved_by_rank0"
    index = json.loads((saved / "model.safetensors.index.json").read_text())
    assert index["weight_map"].keys() == result["state"].keys()
    loaded = {}
    for name in set(index["weight_map"].values()):
        loaded.update(load_file(saved / name))
    assert_params_close(loaded, result["state"], "save_model vs the trained model", atol=0)
