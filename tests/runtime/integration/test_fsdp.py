"""Fully sharded training (FSDP2) on 2 processes through the real accel-launch, gloo on 127.0.0.1.

Two runs of scripts/fsdp_train.py (the plugin in the script; the ACCEL_FSDP_* variables
accel-launch sets) are compared with raw torch in one process at the global batch, and
two runs of scripts/fsdp_checkpoint.py check that a sharded checkpoint resumes exactly.
"""

from __future__ import annotations

import pytest

from runtime import process
from tests.runtime.integration.conftest import assert_params_close, load_script
from tests.runtime.integration.harness import launch_args, run


def _result(path):
    import torch

    return torch.load(path / "result.pt", weights_only=False)


@pytest.fixture(scope="module")
def script():
    return load_script("fsdp_train")


@pytest.fixture(scope="module")
def reference(script):
    """Raw torch, one process, batch GLOBAL_BATCH, AdamW with clipping: no runtime at all."""
    import torch
    from torch.utils.data import DataLoader

    model = script.make_model()
    opt = script.make_optimizer(model.parameters())
    norms = []
    for _ in range(script.EPOCHS):
        for x, y in DataLoader(script.make_data(), batch_size=script.GLOBAL_BATCH):
            torch.nn.functional.mse_loss(model(x), y).backward()
            norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), script.MAX_NORM).item())
            opt.step()
            opt.zero_grad()
    return {"state": {k: v.detach().clone() for k, v in model.state_dict().items()}, "norms": norms}


@pytest.fixture(scope="module")
def by_plugin(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp_plugin")
    run(launch_args("fsdp_train.py", "--out", str(out), "--plugin", "classes"), cwd=out, timeout=300).check()
    return _result(out)


@pytest.fixture(scope="module")
def by_launcher_env(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp_env")
    env = {
        process.ENV_USE_FSDP: "1",
        process.ENV_FSDP_MIN_NUM_PARAMS: "200",
        process.ENV_FSDP_RESHARD_AFTER_FORWARD: "0",
    }
    run(launch_args("fsdp_train.py", "--out", str(out), "--plugin", "env"), cwd=out, timeout=300, env=env).check()
    return _result(out)


def test_two_sharded_processes_at_batch_b_equal_one_process_at_batch_2b(by_plugin, reference):
    assert by_plugin["distributed_type"] == "FSDP" and by_plugin["num_processes"] == 2
    plain = by_plugin["plain"]
    assert_params_close(plain["state"], reference["state"], "FSDP on 2 processes vs raw torch at 2B", atol=1e-5)
    assert plain["norms"] == pytest.approx(reference["norms"], rel=1e-5), "clip_grad_norm_ must return the total norm"
    assert max(reference["norms"]) > 0.5, "the test must actually clip"
    assert plain["unwrapped_is_users_class"], "unwrap_model must give the user's own module"
    assert plain["metrics"] == 10, "gather_for_metrics must return every evaluation sample exactly once"


def test_each_process_holds_about_half_of_the_parameters(by_plugin):
    plain = by_plugin["plain"]
    local, total = plain["local_numel"], plain["total_numel"]
    assert sum(local) == total, f"shards {local} must add up to the model's {total} elements"
    for rank, numel in enumerate(local):
        assert 0.45 <= numel / total <= 0.55, f"rank {rank} holds {numel}/{total} elements, not about 1/2"
    assert plain["shard_units"] == 3, "each Block, then the whole model, must be a shard unit"


def test_accumulation_under_fsdp_equals_large_batch_training(by_plugin, reference):
    accumulated = by_plugin["accumulated"]
    assert accumulated["syncs"][:4] == [False, True, False, True]
    assert_params_close(accumulated["state"], reference["state"], "FSDP, 2 micro steps on 2 processes vs 2B", atol=1e-5)


def test_optimizer_prepared_before_its_model_is_a_clear_error(by_plugin):
    message = by_plugin["wrong_order"]
    assert "before its model" in message and "accelerator.prepare(model, optimizer)" in message, message


def test_bf16_mixed_precision_policy_computes_in_bf16_and_returns_float32(by_plugin):
    assert by_plugin["bf16_policy"] == {"inner": "torch.bfloat16", "output": "torch.float32", "shards": ["torch.float32"]}


def test_launcher_environment_selects_fsdp_and_its_settings(by_launcher_env, reference):
    assert by_launcher_env["distributed_type"] == "FSDP"
    plain = by_launcher_env["plain"]
    # min_num_params=200: the input layer (224) and both blocks' layers (1056 each) are units, then the model.
    assert plain["shard_units"] == 4
    assert_params_close(plain["state"], reference["state"], "FSDP from ACCEL_FSDP_* vs raw torch at 2B", atol=1e-5)


def test_sharded_checkpoint_resumes_in_new_processes_exactly(tmp_path):
    import torch

    run(launch_args("fsdp_checkpoint.py", "--mode", "full", "--out", str(tmp_path)), cwd=tmp_path, timeout=300).check()
    sharded = tmp_path / "state" / "sharded"
    assert sorted(p.name for p in sharded.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"], "one shard file per process"
    assert not (tmp_path / "state" / "model_0.pt").exists(), "no process may write the whole model"
    run(launch_args("fsdp_checkpoint.py", "--mode", "resume", "--out", str(tmp_path)), cwd=tmp_path, timeout=300).check()
    full = torch.load(tmp_path / "full.pt")
    resumed = torch.load(tmp_path / "resume.pt")
    assert_params_close(resumed, full, "FSDP resumed vs uninterrupted run", atol=1e-7)
    assert all(not hasattr(v, "to_local") and v.device.type == "cpu" for v in full.values()), "a full state dict"
    # save_model under FSDP: the gathered weights as safetensors, split with an index, read back equal.
    from safetensors.torch import load_file

    files = sorted((tmp_path / "full_model").glob("model-*.safetensors"))
    assert len(files) > 1 and (tmp_path / "full_model" / "model.safetensors.index.json").exists()
    saved = {k: v for f in files for k, v in load_file(f).items()}
    assert_params_close(saved, full, "save_model's safetensors vs get_state_dict", atol=0)
