"""Cross-process operations on nested tensors: gather, gather_for_metrics, reduce, pad, broadcast
(and objects: gather_object, broadcast_object).

Each is a thin use of torch.distributed's collectives; with one process they return the
input unchanged, so scripts run the same under plain `python`.
"""

from __future__ import annotations

import pickle
from typing import Any

import torch
import torch.distributed as dist

from runtime.accumulation import GradientSync
from runtime.nested import map_tensors

_REDUCTIONS = ("sum", "mean")


def world_size() -> int:
    """Processes in the default group, 1 when there is none."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def gather(data: Any) -> Any:
    """Concatenate every process's tensors along dim 0, in rank order (0-d tensors are stacked).

    Tensors whose first dimension differs between processes are padded for the transfer
    and trimmed again, so uneven last batches gather correctly.
    """
    if world_size() == 1:
        return map_tensors(lambda t: t[None] if t.ndim == 0 else t, data)
    return map_tensors(_gather_tensor, data)


def gather_object(data: list[Any], device: torch.device | str = "cpu") -> list[Any]:
    """Concatenate every process's list of picklable objects, in rank order.

    The lists travel pickled in byte tensors through all_gather (torch's own
    all_gather_object needs NumPy, which the runtime does not depend on). `device` must be
    one the backend can send from: the process's GPU under NCCL.
    """
    if world_size() == 1:
        return list(data)
    payload = torch.frombuffer(bytearray(pickle.dumps(list(data))), dtype=torch.uint8).to(device)
    sizes = _all_sizes(payload, 0).tolist()
    padded = _pad(payload, 0, max(sizes), 0, False)
    parts = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(parts, padded)
    lists = [pickle.loads(bytes(part[:size].cpu().untyped_storage())) for part, size in zip(parts, sizes)]
    return [item for part in lists for item in part]


def gather_for_metrics(
    data: Any, sync: GradientSync, use_gather_object: bool = False, device: torch.device | str = "cpu"
) -> Any:
    """Gather, then drop the samples that were repeated to even out the last batch.

    The prepared dataloader being iterated knows how many real samples its last global
    batch holds (`sync.remainder`); on that batch the gathered result is cut to it.
    """
    use_gather_object = use_gather_object or not _all_tensors(data)
    gathered = gather_object(data, device) if use_gather_object else gather(data)
    if not (sync.end_of_dataloader and sync.remainder > 0):
        return gathered
    keep = sync.remainder
    if use_gather_object:
        return gathered[:keep]
    return map_tensors(lambda t: t[:keep], gathered)


def reduce(data: Any, reduction: str = "sum", scale: float = 1.0) -> Any:
    """Sum (or average) tensors element-wise across processes; returns new tensors."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction={reduction!r} is not one of {', '.join(_REDUCTIONS)}")
    world = world_size()

    def reduce_one(tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.clone()
        if world > 1:
            dist.all_reduce(out, op=dist.ReduceOp.SUM)
        if reduction == "mean":
            out = out / world
        return out * scale if scale != 1.0 else out

    return map_tensors(reduce_one, data)


def pad_across_processes(data: Any, dim: int = 0, pad_index: Any = 0, pad_first: bool = False) -> Any:
    """Pad tensors along `dim` to the largest size any process has, so they can be gathered."""
    if world_size() == 1:
        return data

    def pad_one(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.ndim == 0:
            return tensor
        axis = dim % tensor.ndim
        longest = int(_all_sizes(tensor, axis).max())
        return _pad(tensor, axis, longest, pad_index, pad_first)

    return map_tensors(pad_one, data)


def broadcast(data: Any, from_process: int = 0) -> Any:
    """Send tensors from one process to all; tensors must have the same shape everywhere."""
    if world_size() == 1:
        return data

    def broadcast_one(tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.contiguous().clone()
        dist.broadcast(out, src=from_process)
        return out

    return map_tensors(broadcast_one, data)


def broadcast_object(data: Any, device: torch.device | str = "cpu", from_process: int = 0) -> Any:
    """One process's picklable object on every process (others pass anything, e.g. None).

    The object travels pickled in a byte tensor, its length first (torch's own
    broadcast_object_list needs NumPy, which the runtime does not depend on). `device` must
    be one the backend can send from: the process's GPU under NCCL.
    """
    if world_size() == 1:
        return data
    mine = dist.get_rank() == from_process
    payload = torch.frombuffer(bytearray(pickle.dumps(data)), dtype=torch.uint8) if mine else torch.empty(0, dtype=torch.uint8)
    size = torch.tensor([payload.numel()], dtype=torch.int64, device=device)
    dist.broadcast(size, src=from_process)
    buffer = payload.to(device) if mine else torch.empty(int(size.item()), dtype=torch.uint8, device=device)
    dist.broadcast(buffer, src=from_process)
    return data if mine else pickle.loads(bytes(buffer.cpu().untyped_storage()))


def split_between_processes(inputs: Any, rank: int, world: int, apply_padding: bool = False) -> Any:
    """This process's contiguous share of `inputs` (list, tuple, tensor, or dict of those).

    The first `len % world` processes get one item more; with `apply_padding` the shorter
    shares repeat their last item, so every process has the same length (for gather).
    """
    if isinstance(inputs, dict):
        return {key: split_between_processes(value, rank, world, apply_padding) for key, value in inputs.items()}
    per, extra = divmod(len(inputs), world)
    start = rank * per + min(rank, extra)
    share = inputs[start : start + per + int(rank < extra)]
    if apply_padding and extra and rank >= extra and len(share) > 0:
        if isinstance(share, torch.Tensor):
            share = torch.cat([share, share[-1:]])
        else:
            share = share + type(share)([share[-1]])
    return share


def _gather_tensor(tensor: torch.Tensor) -> torch.Tensor:
    tensor = tensor[None] if tensor.ndim == 0 else tensor.contiguous()
    sizes = _all_sizes(tensor, 0).tolist()
    longest = max(sizes)
    padded = _pad(tensor, 0, longest, 0, False)
    parts = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(parts, padded)
    return torch.cat([part[:size] for part, size in zip(parts, sizes)], dim=0)


def _all_sizes(tensor: torch.Tensor, axis: int) -> torch.Tensor:
    size = torch.tensor([tensor.shape[axis]], device=tensor.device, dtype=torch.int64)
    sizes = [torch.empty_like(size) for _ in range(world_size())]
    dist.all_gather(sizes, size)
    return torch.cat(sizes)


def _pad(tensor: torch.Tensor, axis: int, length: int, value: Any, first: bool) -> torch.Tensor:
    missing = length - tensor.shape[axis]
    if missing <= 0:
        return tensor
    shape = list(tensor.shape)
    shape[axis] = missing
    filler = tensor.new_full(shape, value)
    return torch.cat([filler, tensor] if first else [tensor, filler], dim=axis).contiguous()


def _all_tensors(data: Any) -> bool:
    leaves: list[bool] = []

    def note(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            leaves.append(True)
        elif isinstance(value, dict):
            for item in value.values():
                note(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                note(item)
        else:
            leaves.append(False)

    note(data)
    return bool(leaves) and all(leaves)
