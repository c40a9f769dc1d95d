"""`accel-launch env`: the facts a bug report needs, as plain text to paste.

Versions, devices, backends and the launch settings in effect (flags over pyproject.toml over
built-in defaults). It only reads: nothing is launched, no process group is formed.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from pathlib import Path
from typing import Any, Mapping

from runtime.launch.command import LaunchConfig, omp_threads
from runtime.process import ENV_OMP_NUM_THREADS


def environment_report(config: LaunchConfig, source: Path | None, environ: Mapping[str, str], cpu_count: int) -> str:
    """The whole report; `config` is the resolved launch, `source` the pyproject.toml read."""
    sections = [
        ("Versions", _versions()),
        ("Devices", _devices()),
        ("Backends", _backends()),
        ("Launch settings", _settings(config, source, environ, cpu_count)),
    ]
    lines = []
    for title, rows in sections:
        lines.append(f"{title}:")
        width = max(len(name) for name, _ in rows)
        lines += [f"  {name.ljust(width)}  {value}" for name, value in rows]
    return "\n".join(lines)


def _versions() -> list[tuple[str, str]]:
    import torch

    cuda = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU build"
    return [
        ("accel-migrate", _version("accel-migrate")),
        ("Python", f"{platform.python_version()} ({sys.executable})"),
        ("torch", f"{torch.__version__} ({cuda})"),
        ("accelerate", _version("accelerate")),
        ("safetensors", _version("safetensors")),
        ("numpy", _version("numpy")),
        ("platform", platform.platform()),
    ]


def _devices() -> list[tuple[str, str]]:
    import torch

    count = torch.cuda.device_count()
    names = ", ".join(torch.cuda.get_device_name(i) for i in range(count)) if count else "-"
    mps = getattr(torch.backends, "mps", None)
    return [
        ("CUDA devices", f"{count} ({names})" if count else "0"),
        ("MPS", "available" if mps is not None and mps.is_available() else "not available"),
        ("CPU cores", str(os.cpu_count() or "?")),
    ]


def _backends() -> list[tuple[str, str]]:
    import torch.distributed as dist

    if not dist.is_available():
        return [("torch.distributed", "not available in this torch build")]
    return [(name, "yes" if available() else "no") for name, available in (
        ("gloo", dist.is_gloo_available), ("nccl", dist.is_nccl_available), ("mpi", dist.is_mpi_available)
    )]  # fmt: skip


def _settings(config: LaunchConfig, source: Path | None, environ: Mapping[str, str], cpu_count: int) -> list[tuple[str, str]]:
    rows: list[tuple[str, Any]] = [
        ("defaults from", str(source) if source else "no [tool.accel-launch] in a pyproject.toml here or above"),
        ("nproc_per_node", config.nproc_per_node),
        ("nnodes", config.nnodes),
        ("mixed_precision", config.mixed_precision or "not set (the script's own, else no)"),
        ("cpu", config.cpu),
        ("fsdp", config.fsdp),
        ("process_group_timeout", f"{config.process_group_timeout:g} s" if config.process_group_timeout else "torch's default"),
    ]
    if config.fsdp:
        rows += [
            ("fsdp_wrap_classes", ", ".join(config.fsdp_wrap_classes) or "-"),
            ("fsdp_min_num_params", config.fsdp_min_num_params or "-"),
            ("fsdp_reshard_after_forward", _unset(config.fsdp_reshard_after_forward)),
            ("fsdp_cpu_offload", _unset(config.fsdp_cpu_offload)),
        ]
    threads = omp_threads(config, environ, cpu_count)
    if environ.get(ENV_OMP_NUM_THREADS):
        omp = f"{environ[ENV_OMP_NUM_THREADS]} (from your environment)"
    elif threads is not None:
        omp = f"{threads} (set by accel-launch: {cpu_count} cores / {config.nproc_per_node} processes)"
    else:
        omp = "unset (one process: torch uses every core)"
    rows += [
        (ENV_OMP_NUM_THREADS, omp),
        ("output", "each line prefixed [rankN]:" if config.several_ranks else "as printed (one process)"),
    ]
    return [(name, str(value)) for name, value in rows]


def _unset(value: bool | None) -> str:
    return "runtime default" if value is None else str(value)


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
