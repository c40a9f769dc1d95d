"""The files `save_model` writes: safetensors (or torch's .bin), split by size, Hugging Face names.

One file when the weights fit `max_shard_size`, else numbered shards and an index mapping each
tensor name to its shard (`model.safetensors.index.json`), so `from_pretrained`, safetensors'
loaders and Accelerate's `load_checkpoint_in_model` read what we write. Only the writing lives
here; which process writes, and gathering a sharded model first, is the Accelerator's business.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Mapping

import torch

SAFE_WEIGHTS_NAME = "model.safetensors"
WEIGHTS_NAME = "pytorch_model.bin"
_INDEX_SUFFIX = ".index.json"
# Decimal units as Hugging Face reads them ("10GB" is 10**10 bytes), and the binary ones.
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}  # fmt: skip


def parse_size(size: int | str) -> int:
    """Bytes in `size`: an int, or a string such as "10GB", "500MB", "2GiB"."""
    if isinstance(size, int):
        if size < 1:
            raise ValueError(f"max_shard_size must be positive, got {size}")
        return size
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?I?B?)\s*", str(size).upper())
    if not match or match.group(2) not in _UNITS:
        raise ValueError(f"max_shard_size {size!r} is not a size such as 10GB, 500MB or 2GiB")
    value = int(float(match.group(1)) * _UNITS[match.group(2)])
    if value < 1:
        raise ValueError(f"max_shard_size must be positive, got {size!r}")
    return value


def write_model_files(
    state_dict: Mapping[str, torch.Tensor],
    save_directory: str | os.PathLike[str],
    max_shard_size: int | str = "10GB",
    safe_serialization: bool = True,
) -> list[Path]:
    """Write `state_dict` under `save_directory`; returns the files written (index last).

    Tensors that share memory (tied weights, views) are each written as their own copy:
    safetensors refuses shared storage, and Accelerate's answer, dropping all but one name,
    makes `model.load_state_dict(load_file(...))` fail on the missing key. Files of an
    earlier save with the same base name are removed, so no stale shard or index remains.
    """
    directory = Path(save_directory)
    if directory.is_file():
        raise ValueError(f"save_model needs a directory, but {directory} is a file")
    directory.mkdir(parents=True, exist_ok=True)
    base = SAFE_WEIGHTS_NAME if safe_serialization else WEIGHTS_NAME
    tensors = _own_storage(state_dict) if safe_serialization else {k: v.detach().cpu() for k, v in state_dict.items()}
    shards = split_into_shards(tensors, parse_size(max_shard_size))
    names = _shard_names(base, len(shards))
    _remove_stale(directory, base, keep=set(names))
    written = []
    for name, shard in zip(names, shards):
        path = directory / name
        if safe_serialization:
            from safetensors.torch import save_file

            save_file(shard, str(path), metadata={"format": "pt"})  # "pt": what from_pretrained checks
        else:
            torch.save(shard, path)
        written.append(path)
    if len(shards) > 1:
        index = {
            "metadata": {"total_size": sum(_nbytes(t) for t in tensors.values())},
            "weight_map": {key: name for name, shard in zip(names, shards) for key in shard},
        }
        path = directory / (base + _INDEX_SUFFIX)
        path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        written.append(path)
    return written


def split_into_shards(tensors: Mapping[str, torch.Tensor], max_bytes: int) -> list[dict[str, torch.Tensor]]:
    """Group tensors in order into shards of at most `max_bytes` (Hugging Face's rule: a
    tensor larger than the limit gets a shard of its own; the order of names is kept)."""
    shards: list[dict[str, torch.Tensor]] = [{}]
    used = 0
    for key, tensor in tensors.items():
        size = _nbytes(tensor)
        if shards[-1] and used + size > max_bytes:
            shards.append({})
            used = 0
        shards[-1][key] = tensor
        used += size
    return shards


def _own_storage(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """CPU tensors, contiguous, none sharing memory with another (safetensors' requirements)."""
    seen: set[int] = set()
    result = {}
    for key, tensor in state_dict.items():
        tensor = tensor.detach().cpu()
        storage = tensor.untyped_storage().data_ptr() if tensor.numel() else None
        if storage in seen or not tensor.is_contiguous() or _is_partial_view(tensor):
            tensor = tensor.contiguous().clone()
        if storage is not None:
            seen.add(storage)
        result[key] = tensor
    return result


def _is_partial_view(tensor: torch.Tensor) -> bool:
    # A slice of a bigger storage: safetensors would see it overlap the rest of that storage.
    return tensor.numel() > 0 and tensor.untyped_storage().nbytes() != _nbytes(tensor)


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _shard_names(base: str, count: int) -> list[str]:
    if count == 1:
        return [base]
    stem, suffix = base.rsplit(".", 1)
    return [f"{stem}-{i:05d}-of-{count:05d}.{suffix}" for i in range(1, count + 1)]


def _remove_stale(directory: Path, base: str, keep: set[str]) -> None:
    stem, suffix = base.rsplit(".", 1)
    pattern = re.compile(rf"{re.escape(stem)}(-\d{{5}}-of-\d{{5}})?\.{suffix}({re.escape(_INDEX_SUFFIX)})?")
    for path in directory.iterdir():
        if path.is_file() and path.name not in keep and pattern.fullmatch(path.name):
            path.unlink()
