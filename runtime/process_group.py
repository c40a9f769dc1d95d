"""Forms and tears down the default process group; the only module that calls init_process_group.

It uses torch.distributed's env:// rendezvous as torchrun prepared it; it writes no
rendezvous of its own.
"""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist

from runtime.process import ENV_MASTER_ADDR, ENV_MASTER_PORT, ProcessInfo


class ProcessGroupError(RuntimeError):
    """The processes could not find each other; the message names the address and rank."""


def init_process_group(info: ProcessInfo, timeout_s: float | None = None) -> bool:
    """Join the job's process group; returns True when this call created it.

    A group the script formed itself is reused and left for the script to destroy.
    """
    if not info.launched:
        return False
    if dist.is_initialized():
        return False
    if info.device.startswith("cuda"):
        # NCCL needs each process on its own GPU before the group forms.
        torch.cuda.set_device(torch.device(info.device))
    kwargs = {}
    if timeout_s is not None:
        kwargs["timeout"] = datetime.timedelta(seconds=timeout_s)
    try:
        dist.init_process_group(
            backend=info.backend,
            init_method="env://",
            rank=info.rank,
            world_size=info.world_size,
            **kwargs,
        )
    except Exception as exc:  # torch raises several types here (DistStoreError, RuntimeError, ValueError)
        raise ProcessGroupError(
            f"rank {info.rank} of {info.world_size} could not join the process group at "
            f"{ENV_MASTER_ADDR}={info.master_addr} {ENV_MASTER_PORT}={info.master_port} "
            f"(backend {info.backend}): {_first_line(exc)}. Check that every node uses the same "
            f"address and port, that the port is reachable, and that all ranks were started."
        ) from exc
    return True


def destroy_process_group(created: bool) -> None:
    """Destroy the group if this runtime created it and it still exists."""
    if created and dist.is_initialized():
        dist.destroy_process_group()


def barrier(info: ProcessInfo) -> None:
    """Wait for every process; a no-op when there is only one."""
    if info.world_size > 1 and dist.is_initialized():
        if info.backend == "nccl":
            dist.barrier(device_ids=[torch.device(info.device).index])
        else:
            dist.barrier()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0].rstrip(".")
