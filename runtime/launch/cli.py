"""The `accel-launch` command line: options → LaunchConfig → torchrun. No launching logic here.

Everything after the script path belongs to the script and is passed on untouched.
`accel-launch env` prints a report for bug reports instead of launching (a script named
`env` runs as `accel-launch ./env`). Unset options take `[tool.accel-launch]` from the
nearest pyproject.toml, then the built-in defaults.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, List, Optional

import typer

from runtime.launch.command import LaunchConfig, LaunchConfigError, resolve_defaults, run, usable_cpus
from runtime.launch.config import LaunchDefaults, LaunchFileError, load_defaults
from runtime.process import MIXED_PRECISION_CHOICES

_SETTINGS = {"context_settings": {"allow_interspersed_args": False, "ignore_unknown_options": True}}
app = typer.Typer(
    add_completion=False,
    # Stop option parsing at the script: `accel-launch train.py --lr 0.1` gives --lr to train.py.
    **_SETTINGS,
    help="Run a training script on N processes (and several machines) through torchrun. "
    "`accel-launch env` prints versions, devices and the settings in effect.",
)
env_app = typer.Typer(add_completion=False, help="Print versions, devices, backends and launch settings.")


@app.command()
def launch(
    script: str = typer.Argument(..., help="The training script.", metavar="SCRIPT"),
    script_args: Optional[List[str]] = typer.Argument(None, help="Arguments for the script.", metavar="ARGS..."),
    nproc_per_node: Optional[int] = typer.Option(
        None, "--nproc-per-node", "--nproc_per_node", help="Processes on this machine (default: number of GPUs, else 1)."
    ),
    nnodes: Optional[int] = typer.Option(None, "--nnodes", help="Number of machines (default 1)."),
    node_rank: int = typer.Option(0, "--node-rank", "--node_rank", help="This machine's index, 0..nnodes-1."),
    master_addr: str = typer.Option("127.0.0.1", "--master-addr", "--master_addr", help="Address of machine 0."),
    master_port: Optional[int] = typer.Option(
        None, "--master-port", "--master_port", help="Port on machine 0 (default: a free port on one machine, 29500 on several)."
    ),
    mixed_precision: Optional[str] = typer.Option(
        None, "--mixed-precision", help=f"One of {', '.join(MIXED_PRECISION_CHOICES)}; the script's own choice wins."
    ),
    cpu: Optional[bool] = typer.Option(None, "--cpu/--no-cpu", help="Train on CPU even when GPUs are present."),
    fsdp: Optional[bool] = typer.Option(None, "--fsdp/--no-fsdp", help="Fully sharded training (FSDP2)."),
    fsdp_wrap_classes: Optional[str] = typer.Option(
        None, "--fsdp-wrap-classes", help="Comma-separated module class names that become shards."
    ),
    fsdp_min_num_params: Optional[int] = typer.Option(
        None, "--fsdp-min-num-params", help="Shard every submodule with at least this many parameters."
    ),
    fsdp_reshard_after_forward: Optional[bool] = typer.Option(
        None, "--fsdp-reshard-after-forward/--no-fsdp-reshard-after-forward", help="Free gathered parameters after forward."
    ),
    fsdp_cpu_offload: Optional[bool] = typer.Option(
        None, "--fsdp-cpu-offload/--no-fsdp-cpu-offload", help="Keep sharded parameters on the CPU."
    ),
    process_group_timeout: Optional[float] = typer.Option(
        None, "--process-group-timeout", metavar="SECONDS",
        help="How long a collective (a barrier) waits for the other processes before failing (torch's default: 10 minutes with NCCL).",
    ),
) -> None:
    """Run SCRIPT with ARGS on every process; exit non-zero, naming the rank, if one fails.

    Unset options come from \\[tool.accel-launch] in the nearest pyproject.toml.
    `accel-launch env` prints versions, devices and the settings in effect.
    """
    flags = {
        "nproc_per_node": nproc_per_node, "nnodes": nnodes, "mixed_precision": mixed_precision, "cpu": cpu,
        "fsdp": fsdp, "fsdp_min_num_params": fsdp_min_num_params,
        "fsdp_wrap_classes": tuple(n.strip() for n in fsdp_wrap_classes.split(",") if n.strip())
        if fsdp_wrap_classes is not None else None,
        "fsdp_reshard_after_forward": fsdp_reshard_after_forward, "fsdp_cpu_offload": fsdp_cpu_offload,
        "process_group_timeout": process_group_timeout,
    }  # fmt: skip
    fixed = {"node_rank": node_rank, "master_addr": master_addr, "master_port": master_port}
    config = _config(_defaults().merged(flags), script=script, script_args=tuple(script_args or ()), **fixed)
    if not os.path.isfile(script):
        raise typer.BadParameter(f"no such script: {script}", param_hint="SCRIPT")
    raise typer.Exit(run(resolve_defaults(config, cuda_devices=_cuda_devices(config))))


@env_app.command()
def env() -> None:
    """Print what a bug report needs: versions, devices, backends, the launch settings in effect."""
    from runtime.launch.report import environment_report

    defaults = _defaults()
    config = _config(defaults.merged({}), script="-")
    resolved = resolve_defaults(config, cuda_devices=_cuda_devices(config), free_port=29500)  # port unused
    typer.echo(environment_report(resolved, defaults.path, os.environ, usable_cpus()))


def _defaults() -> LaunchDefaults:
    try:
        return load_defaults()
    except LaunchFileError as error:
        # One plain line, never a box: rich would fold a long path at the terminal's width.
        typer.echo(f"accel-launch: error: {error}", err=True)
        raise typer.Exit(2) from None


def _config(settings: dict[str, Any], **fields: Any) -> LaunchConfig:
    if settings.get("mixed_precision"):
        settings["mixed_precision"] = settings["mixed_precision"].lower()
    try:
        return LaunchConfig(**fields, **settings)
    except LaunchConfigError as error:
        raise typer.BadParameter(str(error)) from None


def _cuda_devices(config: LaunchConfig) -> int:
    if config.cpu or config.nproc_per_node is not None:
        return 0
    import torch

    return torch.cuda.device_count()


def main() -> None:
    """Entry point of the `accel-launch` console script."""
    if importlib.util.find_spec("torch") is None:
        typer.echo("accel-launch: error: torch is not installed; install the runtime: pip install 'accel-migrate[runtime]'", err=True)
        raise SystemExit(2)
    if sys.argv[1:2] == ["env"]:
        env_app(sys.argv[2:], prog_name="accel-launch env")
    app()
