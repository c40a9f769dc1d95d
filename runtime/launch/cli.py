"""The `accel-launch` command line: options → LaunchConfig → torchrun. No launching logic here.

Everything after the script path belongs to the script and is passed on untouched.
"""

from __future__ import annotations

import os
from typing import List, Optional

import typer

from runtime.launch.command import LaunchConfig, LaunchConfigError, resolve_defaults, run
from runtime.process import MIXED_PRECISION_CHOICES

app = typer.Typer(
    add_completion=False,
    # Stop option parsing at the script: `accel-launch train.py --lr 0.1` gives --lr to train.py.
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    help="Run a training script on N processes (and several machines) through torchrun.",
)


@app.command()
def launch(
    script: str = typer.Argument(..., help="The training script.", metavar="SCRIPT"),
    script_args: Optional[List[str]] = typer.Argument(None, help="Arguments for the script.", metavar="ARGS..."),
    nproc_per_node: Optional[int] = typer.Option(
        None, "--nproc-per-node", help="Processes on this machine (default: number of GPUs, else 1)."
    ),
    nnodes: int = typer.Option(1, "--nnodes", help="Number of machines."),
    node_rank: int = typer.Option(0, "--node-rank", help="This machine's index, 0..nnodes-1."),
    master_addr: str = typer.Option("127.0.0.1", "--master-addr", help="Address of machine 0."),
    master_port: Optional[int] = typer.Option(
        None, "--master-port", help="Port on machine 0 (default: a free port on one machine, 29500 on several)."
    ),
    mixed_precision: Optional[str] = typer.Option(
        None, "--mixed-precision", help=f"One of {', '.join(MIXED_PRECISION_CHOICES)}; the script's own choice wins."
    ),
    cpu: bool = typer.Option(False, "--cpu", help="Train on CPU even when GPUs are present."),
) -> None:
    """Run SCRIPT with ARGS on every process; exit non-zero, naming the rank, if one fails."""
    try:
        config = LaunchConfig(
            script=script,
            script_args=tuple(script_args or ()),
            nproc_per_node=nproc_per_node,
            nnodes=nnodes,
            node_rank=node_rank,
            master_addr=master_addr,
            master_port=master_port,
            mixed_precision=mixed_precision.lower() if mixed_precision else None,
            cpu=cpu,
        )
    except LaunchConfigError as error:
        raise typer.BadParameter(str(error)) from None
    if not os.path.isfile(script):
        raise typer.BadParameter(f"no such script: {script}", param_hint="SCRIPT")
    raise typer.Exit(run(resolve_defaults(config, cuda_devices=_cuda_devices(config))))


def _cuda_devices(config: LaunchConfig) -> int:
    if config.cpu or config.nproc_per_node is not None:
        return 0
    import torch

    return torch.cuda.device_count()


def main() -> None:
    """Entry point of the `accel-launch` console script."""
    app()
