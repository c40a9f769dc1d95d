"""save_state / load_state under FSDP: each process writes and reads only its own shards.

Models and optimizers go through torch.distributed.checkpoint into `<dir>/sharded/` (one
file per process plus `.metadata`); schedulers, dataloader positions, custom objects,
the scaler and the RNG states are written as without FSDP (runtime/checkpoint.py), beside
it. Resume on the same number of processes: the dataloader and RNG states are per rank.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from runtime import checkpoint
from runtime.checkpoint import Checkpointables
from runtime.precision import Precision
from runtime.process import ProcessInfo

SHARDED_DIR = "sharded"


def save_state(
    output_dir: str | os.PathLike[str], objects: Checkpointables, precision: Precision, info: ProcessInfo
) -> Path:
    """Write the run's state under `output_dir`; every process must call it."""
    directory = Path(output_dir)
    directory.mkdir(parents=True, exist_ok=True)
    dcp.save(_sharded_state(objects), checkpoint_id=str(directory / SHARDED_DIR))
    return checkpoint.save_state(directory, _replicated_part(objects), [], precision, info)


def load_state(
    input_dir: str | os.PathLike[str], objects: Checkpointables, precision: Precision, info: ProcessInfo
) -> None:
    """Restore what `save_state` wrote into the objects prepared in the same order."""
    directory = Path(input_dir)
    sharded = directory / SHARDED_DIR
    if not (sharded / ".metadata").is_file():
        hint = " (it was saved without FSDP)" if (directory / "model_0.pt").exists() else ""
        raise FileNotFoundError(f"no sharded FSDP checkpoint at {sharded}{hint}: load_state needs one written by save_state under FSDP")
    state = _sharded_state(objects)
    dcp.load(state, checkpoint_id=str(sharded))
    for index, model in enumerate(objects.models):
        set_model_state_dict(model, state[f"model_{index}"])
    for index, (optimizer, owner) in enumerate(_with_owners(objects)):
        set_optimizer_state_dict(owner, optimizer, state[f"optimizer_{index}"])
    checkpoint.load_state(directory, _replicated_part(objects), [], precision, info)


def _sharded_state(objects: Checkpointables) -> dict[str, Any]:
    """This process's shards of every model and optimizer, keyed by parameter name (FQN)."""
    state: dict[str, Any] = {f"model_{i}": get_model_state_dict(model) for i, model in enumerate(objects.models)}
    for index, (optimizer, owner) in enumerate(_with_owners(objects)):
        state[f"optimizer_{index}"] = get_optimizer_state_dict(owner, optimizer)
    return state


def _with_owners(objects: Checkpointables) -> list[tuple[Any, nn.Module]]:
    """Each prepared optimizer's inner optimizer with the model whose parameters it updates.

    torch.distributed.checkpoint names optimizer state by the model's parameter names, so
    an optimizer must update parameters of one prepared model.
    """
    pairs = []
    for prepared in objects.optimizers:
        optimizer = prepared.optimizer
        held = {id(p) for group in optimizer.param_groups for p in group["params"]}
        owners = [m for m in objects.models if held <= {id(p) for p in m.parameters()}]
        if not owners:
            raise ValueError(
                f"save_state/load_state under FSDP: the optimizer {type(optimizer).__name__} updates parameters "
                "of no single prepared model (several models, or parameters never prepared); "
                "give each model its own optimizer"
            )
        pairs.append((optimizer, owners[0]))
    return pairs


def _replicated_part(objects: Checkpointables) -> Checkpointables:
    """Everything but models and optimizers: written as without FSDP."""
    return Checkpointables(
        schedulers=objects.schedulers, dataloaders=objects.dataloaders, custom=objects.custom
    )
