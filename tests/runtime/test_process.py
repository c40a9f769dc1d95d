"""runtime/process.py: parsing torchrun's environment and the launcher's settings, no processes."""

from __future__ import annotations

import pytest

from runtime.process import (
    ENV_LOCAL_RANK,
    ENV_LOCAL_WORLD_SIZE,
    ENV_MASTER_ADDR,
    ENV_MASTER_PORT,
    ENV_MIXED_PRECISION,
    ENV_NODE_RANK,
    ENV_PROCESS_GROUP_TIMEOUT,
    ENV_RANK,
    ENV_USE_CPU,
    ENV_WORLD_SIZE,
    DistributedType,
    LauncherSettings,
    LaunchEnvError,
    ProcessInfo,
)

TORCHRUN = {
    ENV_RANK: "3",
    ENV_LOCAL_RANK: "1",
    ENV_WORLD_SIZE: "4",
    ENV_LOCAL_WORLD_SIZE: "2",
    ENV_NODE_RANK: "1",
    ENV_MASTER_ADDR: "10.0.0.1",
    ENV_MASTER_PORT: "29500",
}


def test_no_environment_is_one_unlaunched_process():
    info = ProcessInfo.from_env({}, cpu=False, cuda_devices=0)
    assert (info.rank, info.world_size, info.launched, info.device) == (0, 1, False, "cpu")
    assert info.distributed_type is DistributedType.NO
    assert info.is_main_process and info.is_local_main_process


def test_single_process_takes_the_first_gpu_unless_cpu_is_asked():
    assert ProcessInfo.from_env({}, cpu=False, cuda_devices=2).device == "cuda:0"
    assert ProcessInfo.from_env({}, cpu=True, cuda_devices=2).device == "cpu"


def test_torchrun_environment_is_parsed():
    info = ProcessInfo.from_env(TORCHRUN, cpu=False, cuda_devices=0)
    assert (info.rank, info.local_rank, info.world_size, info.local_world_size) == (3, 1, 4, 2)
    assert (info.node_rank, info.master_addr, info.master_port) == (1, "10.0.0.1", 29500)
    assert info.launched and not info.is_main_process and not info.is_local_main_process
    assert (info.device, info.backend, info.distributed_type) == ("cpu", "gloo", DistributedType.MULTI_CPU)


def test_gpus_give_each_local_rank_its_device_and_nccl():
    info = ProcessInfo.from_env(TORCHRUN, cpu=False, cuda_devices=2)
    assert (info.device, info.backend, info.distributed_type) == ("cuda:1", "nccl", DistributedType.MULTI_GPU)


def test_a_single_launched_process_is_still_launched():
    env = {**TORCHRUN, ENV_RANK: "0", ENV_LOCAL_RANK: "0", ENV_WORLD_SIZE: "1", ENV_LOCAL_WORLD_SIZE: "1"}
    info = ProcessInfo.from_env(env, cpu=False, cuda_devices=0)
    assert info.launched and info.distributed_type is DistributedType.NO


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({ENV_MASTER_PORT: None}, "MASTER_PORT not set"),
        ({ENV_RANK: "x"}, "RANK='x' is not an integer"),
        ({ENV_RANK: "4"}, "RANK=4 is outside WORLD_SIZE=4"),
        ({ENV_LOCAL_RANK: "2"}, "LOCAL_RANK=2 is outside LOCAL_WORLD_SIZE=2"),
    ],
)
def test_a_broken_environment_is_a_clear_error(change, message):
    env = {k: v for k, v in {**TORCHRUN, **change}.items() if v is not None}
    with pytest.raises(LaunchEnvError, match=message):
        ProcessInfo.from_env(env, cpu=False, cuda_devices=0)


def test_more_local_ranks_than_gpus_is_an_error():
    with pytest.raises(LaunchEnvError, match="1 GPU"):
        ProcessInfo.from_env(TORCHRUN, cpu=False, cuda_devices=1)


def test_launcher_settings_round_trip_through_the_environment():
    settings = LauncherSettings(mixed_precision="bf16", cpu=True, process_group_timeout_s=5.0)
    env = settings.to_env()
    assert env == {ENV_MIXED_PRECISION: "bf16", ENV_USE_CPU: "1", ENV_PROCESS_GROUP_TIMEOUT: "5.0"}
    assert LauncherSettings.from_env(env) == settings
    assert LauncherSettings.from_env({}) == LauncherSettings()
    assert LauncherSettings().to_env() == {}


@pytest.mark.parametrize(("raw", "value"), [("1", True), ("true", True), ("0", False), ("no", False)])
def test_cpu_flag_spellings(raw, value):
    assert LauncherSettings.from_env({ENV_USE_CPU: raw}).cpu is value


@pytest.mark.parametrize(("env", "message"), [({ENV_USE_CPU: "maybe"}, "not a boolean"), ({ENV_PROCESS_GROUP_TIMEOUT: "-1"}, "positive")])
def test_bad_launcher_settings_are_clear_errors(env, message):
    with pytest.raises(LaunchEnvError, match=message):
        LauncherSettings.from_env(env)
