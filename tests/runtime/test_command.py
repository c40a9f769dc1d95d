"""runtime/launch/command.py and cli.py: LaunchConfig -> torchrun argv, without processes."""

from __future__ import annotations

import dataclasses
import runpy
import sys

import pytest
from typer.testing import CliRunner

from runtime.launch import cli, command
from runtime.launch.command import (
    CHILD_MODULE,
    LaunchConfig,
    LaunchConfigError,
    launch_env,
    resolve_defaults,
    script_env,
    torchrun_argv,
)
from runtime.process import (
    ENV_FSDP_CPU_OFFLOAD,
    ENV_FSDP_MIN_NUM_PARAMS,
    ENV_FSDP_RESHARD_AFTER_FORWARD,
    ENV_FSDP_WRAP_CLASSES,
    ENV_MIXED_PRECISION,
    ENV_OMP_NUM_THREADS,
    ENV_PROCESS_GROUP_TIMEOUT,
    ENV_USE_CPU,
    ENV_USE_FSDP,
)


def test_single_node_argv():
    config = LaunchConfig(script="train.py", script_args=("--lr", "0.1"), nproc_per_node=2, master_port=1234)
    assert torchrun_argv(config) == [
        "--nnodes", "1", "--nproc-per-node", "2", "--node-rank", "0", "--master-addr", "127.0.0.1",
        "--master-port", "1234", "--max-restarts", "0", "--module", CHILD_MODULE, "train.py", "--lr", "0.1",
    ]  # fmt: skip
    one = torchrun_argv(LaunchConfig(script="t.py", nproc_per_node=1), log_dir="/tmp/logs")
    assert one[one.index("--log-dir") + 1] == "/tmp/logs"


def test_multi_node_argv_without_port_leaves_torchrun_default():
    config = LaunchConfig(script="t.py", nproc_per_node=8, nnodes=2, node_rank=1, master_addr="10.1.1.1")
    argv = torchrun_argv(config)
    assert argv[:8] == ["--nnodes", "2", "--nproc-per-node", "8", "--node-rank", "1", "--master-addr", "10.1.1.1"]
    assert "--master-port" not in argv


def test_torchrun_parses_our_argv_and_keeps_script_arguments_untouched():
    from torch.distributed import run as torchrun

    script_args = ("--nproc-per-node", "5", "--lr", "0.1", "--", "-m", "x")
    config = LaunchConfig(script="train.py", script_args=script_args, nproc_per_node=2, master_port=1)
    args = torchrun.parse_args(torchrun_argv(config))
    assert args.module and args.training_script == CHILD_MODULE
    assert args.training_script_args == ["train.py", *script_args]
    assert (args.nproc_per_node, args.nnodes, args.max_restarts, args.master_port) == ("2", "1", 0, 1)


def test_defaults_are_resolved_at_run_time():
    resolved = resolve_defaults(LaunchConfig(script="t.py"), cuda_devices=4, free_port=4321)
    assert (resolved.nproc_per_node, resolved.master_port) == (4, 4321)
    assert resolve_defaults(LaunchConfig(script="t.py"), cuda_devices=0, free_port=1).nproc_per_node == 1
    assert resolve_defaults(LaunchConfig(script="t.py", cpu=True), cuda_devices=4, free_port=1).nproc_per_node == 1
    several = resolve_defaults(LaunchConfig(script="t.py", nnodes=2), cuda_devices=0)
    assert several.master_port is None, "on several nodes every node must be given the same port"


def test_script_env_uses_the_runtime_constants():
    assert script_env(LaunchConfig(script="t.py")) == {}
    env = script_env(LaunchConfig(script="t.py", mixed_precision="bf16", cpu=True))
    assert env == {ENV_MIXED_PRECISION: "bf16", ENV_USE_CPU: "1"}
    assert script_env(LaunchConfig(script="t.py", process_group_timeout=3600)) == {ENV_PROCESS_GROUP_TIMEOUT: "3600"}


def test_fsdp_settings_reach_the_script_through_the_runtime_constants():
    config = LaunchConfig(
        script="t.py", fsdp=True, fsdp_wrap_classes=("Block", "Head"), fsdp_min_num_params=1000,
        fsdp_reshard_after_forward=False, fsdp_cpu_offload=True,
    )  # fmt: skip
    assert script_env(config) == {
        ENV_USE_FSDP: "1", ENV_FSDP_WRAP_CLASSES: "Block,Head", ENV_FSDP_MIN_NUM_PARAMS: "1000",
        ENV_FSDP_RESHARD_AFTER_FORWARD: "0", ENV_FSDP_CPU_OFFLOAD: "1",
    }  # fmt: skip
    assert script_env(LaunchConfig(script="t.py", fsdp=True)) == {ENV_USE_FSDP: "1"}


def test_threads_only_when_several_processes_share_the_machine():
    seeded = {"PYTHONHASHSEED": "0"}  # the user's hash seed: accel-launch adds none (next test)
    two = LaunchConfig(script="t.py", nproc_per_node=2)
    assert launch_env(two, seeded, cpu_count=16) == {ENV_OMP_NUM_THREADS: "8"}
    assert launch_env(two, {ENV_OMP_NUM_THREADS: "3", **seeded}, cpu_count=16) == {}
    assert launch_env(LaunchConfig(script="t.py", nproc_per_node=4), seeded, cpu_count=2)[ENV_OMP_NUM_THREADS] == "1"
    assert launch_env(LaunchConfig(script="t.py", nproc_per_node=1), seeded, cpu_count=16) == {}
    two_nodes = LaunchConfig(script="t.py", nproc_per_node=1, nnodes=2)
    assert launch_env(two_nodes, seeded, cpu_count=16) == {}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"nproc_per_node": 0}, "--nproc-per-node"),
        ({"nnodes": 0}, "--nnodes"),
        ({"nnodes": 2, "node_rank": 2}, "--node-rank"),
        ({"master_port": 70000}, "--master-port"),
        ({"mixed_precision": "fp8"}, "--mixed-precision"),
        ({"fsdp_cpu_offload": True}, "need --fsdp"),
        ({"fsdp": True, "fsdp_min_num_params": 0}, "--fsdp-min-num-params"),
        ({"process_group_timeout": 0}, "--process-group-timeout"),
    ],
)
def test_impossible_settings_are_refused(fields, message):
    with pytest.raises(LaunchConfigError, match=message):
        LaunchConfig(script="t.py", **fields)


def test_find_free_port_binds():
    assert 0 < command.find_free_port() < 65536


@pytest.fixture
def captured(monkeypatch):
    """Replace the run step: the CLI is checked up to the config it would launch."""
    seen = []
    monkeypatch.setattr(cli, "run", lambda config: seen.append(config) or 0)
    return seen


@pytest.fixture
def script(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    return "train.py"


def test_cli_passes_everything_after_the_script_to_it(captured, script):
    argv = ["--nproc-per-node", "2", "--mixed-precision", "BF16", script, "--lr", "0.1", "--nproc-per-node", "9", "--help"]
    result = CliRunner().invoke(cli.app, argv)
    assert result.exit_code == 0, result.output
    (config,) = captured
    assert config.script == "train.py"
    assert config.script_args == ("--lr", "0.1", "--nproc-per-node", "9", "--help")
    assert (config.nproc_per_node, config.mixed_precision, config.nnodes) == (2, "bf16", 1)
    assert config.master_port is not None, "a single node gets a free port"


def test_cli_rejects_a_bad_setting_in_one_line(captured, script):
    result = CliRunner().invoke(cli.app, ["--nnodes", "2", "--node-rank", "5", script])
    assert result.exit_code == 2 and not captured
    assert "--node-rank must be in 0..1" in result.output
    result = CliRunner().invoke(cli.app, ["missing.py"])
    assert result.exit_code == 2 and "no such script: missing.py" in result.output


def test_cli_exit_status_is_the_run_status(monkeypatch, script):
    monkeypatch.setattr(cli, "run", lambda config: 7)
    assert CliRunner().invoke(cli.app, ["--nproc-per-node", "1", script]).exit_code == 7


def test_python_dash_m_runtime_launch_is_the_cli(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["accel-launch", "--help"])
    monkeypatch.setenv("COLUMNS", "200")  # rich cuts long option names on a narrow terminal
    with pytest.raises(SystemExit) as stop:
        runpy.run_module("runtime.launch", run_name="__main__", alter_sys=False)
    assert stop.value.code == 0
    help_text = capsys.readouterr().out
    options = ("--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port", "--mixed-precision",
               "--cpu", "--fsdp", "--fsdp-wrap-classes", "--fsdp-min-num-params", "--fsdp-reshard-after-forward",
               "--fsdp-cpu-offload")  # fmt: skip
    for option in options:
        assert option in help_text, f"{option} missing from --help"


def test_hash_seed_is_shared_derived_from_the_rendezvous_and_yields_to_the_user():
    from runtime.launch.command import hash_seed

    config = LaunchConfig(script="train.py", master_addr="10.0.0.1", master_port=29500, nnodes=2)
    seed = hash_seed(config, {})
    assert seed is not None and 1 <= int(seed) < 2**32 and hash_seed(config, {}) == seed  # every node agrees
    assert hash_seed(dataclasses.replace(config, master_port=29501), {}) != seed  # a new run, a new seed
    assert hash_seed(config, {"PYTHONHASHSEED": "0"}) is None  # the user's choice stands
