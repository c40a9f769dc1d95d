"""Fully sharded data parallel (torch's FSDP2, `fully_shard`): the strategy for models that
outgrow one device.

Each process keeps 1/N of every parameter, gradient and optimizer state; a shard unit's
parameters are all-gathered just before its forward and backward, and gradients are
reduce-scattered after. Imported only when chosen (torch.distributed.fsdp takes seconds
to import).
"""

from __future__ import annotations

import contextlib
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard

from runtime import fsdp_checkpoint
from runtime.checkpoint import Checkpointables
from runtime.distributed import unwrap_module
from runtime.fsdp_plugin import FSDPSettingsError, FullyShardedDataParallelPlugin
from runtime.precision import Precision
from runtime.process import DistributedType, ProcessInfo


class OptimizerOrderError(RuntimeError):
    """An optimizer was prepared before its model: FSDP replaces the parameters it holds."""


class FSDP:
    """Shards every prepared model over all processes (one-dimensional device mesh).

    `fully_shard` replaces a module's parameters by sharded DTensor parameters in place, so
    an optimizer must hold the new ones. One built over the model before prepare() is
    re-pointed when it is prepared (as Accelerate does), provided it has not stepped yet.
    """

    distributed_type = DistributedType.FSDP
    # fully_shard moves each unit to the mesh's device as it shards it, so the whole model
    # never sits on one GPU at once (CPU offload keeps the shards where they are).
    places_model = True

    def __init__(self, info: ProcessInfo, plugin: FullyShardedDataParallelPlugin) -> None:
        self.plugin = plugin
        self._mesh = init_device_mesh(torch.device(info.device).type, (info.world_size,))
        self._kwargs = _fully_shard_kwargs(plugin)
        # id(original parameter) -> (a weak reference to it, its sharded replacement)
        self._replaced: dict[int, tuple[weakref.ref[nn.Parameter], nn.Parameter]] = {}
        self._optimizers: list[weakref.ref[torch.optim.Optimizer]] = []

    def wrap_model(self, model: nn.Module) -> nn.Module:
        if isinstance(model, FSDPModule):
            return model
        self._refuse_if_optimizer_came_first(model)
        before = {name: param for name, param in model.named_parameters()}
        inner = {**self._kwargs, "mp_policy": _without_output_cast(self._kwargs["mp_policy"])}
        for unit in shard_units(model, self.plugin):
            fully_shard(unit, mesh=self._mesh, **inner)
        fully_shard(model, mesh=self._mesh, **self._kwargs)
        after = dict(model.named_parameters())
        for name, param in before.items():
            self._replaced[id(param)] = (weakref.ref(param), after[name])
        return model

    def unwrap_model(self, model: nn.Module) -> nn.Module:
        # fully_shard changes the module's class in place: the sharded module is the user's own.
        return unwrap_module(model)

    def no_sync(self, model: nn.Module) -> contextlib.AbstractContextManager[None]:
        return _without_gradient_sync(model)

    def adopt_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Point `optimizer` at the sharded parameters of the models prepared so far."""
        for group in optimizer.param_groups:
            if any(self._sharded(param) is not None for param in group["params"]):
                if optimizer.state:
                    raise OptimizerOrderError(
                        f"the optimizer {type(optimizer).__name__} has already stepped on the unsharded "
                        "parameters; under FSDP build it after prepare(model), over model.parameters()"
                    )
                group["params"] = [_first(self._sharded(param), param) for param in group["params"]]
        self._optimizers.append(weakref.ref(optimizer))

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Every parameter gathered, on the CPU of the main process ({} on the others); collective."""
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return get_model_state_dict(self.unwrap_model(model), options=options)

    def save_state(self, directory: str | Path, objects: Checkpointables, precision: Precision, info: ProcessInfo) -> Path:
        return fsdp_checkpoint.save_state(directory, objects, precision, info)

    def load_state(self, directory: str | Path, objects: Checkpointables, precision: Precision, info: ProcessInfo) -> None:
        fsdp_checkpoint.load_state(directory, objects, precision, info)

    def _sharded(self, param: torch.Tensor) -> nn.Parameter | None:
        entry = self._replaced.get(id(param))
        return entry[1] if entry is not None and entry[0]() is param else None

    def _refuse_if_optimizer_came_first(self, model: nn.Module) -> None:
        own = {id(param) for param in model.parameters()}
        for ref in self._optimizers:
            optimizer = ref()
            if optimizer is None:
                continue
            if any(id(param) in own for group in optimizer.param_groups for param in group["params"]):
                raise OptimizerOrderError(
                    f"prepare() got the optimizer {type(optimizer).__name__} before its model "
                    f"{type(model).__name__}: under FSDP the model is sharded first and the optimizer "
                    "must hold the sharded parameters. Prepare the model first: "
                    "`model, optimizer = accelerator.prepare(model, optimizer)` (one call, any order), "
                    "or `model = accelerator.prepare(model)` before building or preparing the optimizer"
                )


def shard_units(model: nn.Module, plugin: FullyShardedDataParallelPlugin) -> list[nn.Module]:
    """The submodules that become their own shard unit, children before their parents."""
    policy = plugin.auto_wrap_policy
    if policy == "no_wrap":
        return []
    if policy == "size_based_wrap":
        units: list[nn.Module] = []
        _collect_by_size(model, plugin.min_num_params or 0, units, is_root=True)
        return units
    if policy == "transformer_based_wrap":
        policy = _class_policy(model, plugin.transformer_cls_names_to_wrap or [])
    chosen: Callable[[nn.Module], bool] = policy  # type: ignore[assignment]
    return [module for module in reversed(list(model.modules())) if module is not model and chosen(module)]


def local_numel(model: nn.Module) -> tuple[int, int]:
    """(elements of the parameters this process holds, elements of the whole model)."""
    local = total = 0
    for param in model.parameters():
        local += param.to_local().numel() if hasattr(param, "to_local") else param.numel()
        total += param.numel()
    return local, total


def _class_policy(model: nn.Module, names: list[str]) -> Callable[[nn.Module], bool]:
    present = {type(module).__name__ for module in model.modules()}
    missing = [name for name in names if name not in present]
    if missing:
        raise FSDPSettingsError(
            f"no module of class {', '.join(missing)} in {type(model).__name__} to shard "
            f"(transformer_cls_names_to_wrap); its classes are {', '.join(sorted(present))}"
        )
    wanted = set(names)
    return lambda module: type(module).__name__ in wanted


def _collect_by_size(module: nn.Module, threshold: int, units: list[nn.Module], *, is_root: bool) -> int:
    """FSDP1's size rule: a module holding `threshold` parameters not in a smaller unit is one.

    Returns the parameter elements under `module` that no unit has taken yet.
    """
    free = sum(param.numel() for param in module.parameters(recurse=False))
    for child in module.children():
        free += _collect_by_size(child, threshold, units, is_root=False)
    if not is_root and free >= threshold:
        units.append(module)
        return 0
    return free


def _fully_shard_kwargs(plugin: FullyShardedDataParallelPlugin) -> dict[str, Any]:
    offload = plugin.cpu_offload
    if offload is True:
        offload = CPUOffloadPolicy()
    elif offload is False:
        offload = OffloadPolicy()
    precision = plugin.mixed_precision_policy
    if not isinstance(precision, MixedPrecisionPolicy):
        precision = MixedPrecisionPolicy(**plugin.precision_dtypes())
    return {"reshard_after_forward": plugin.reshard_after_forward, "offload_policy": offload, "mp_policy": precision}


def _first(sharded: nn.Parameter | None, original: torch.Tensor) -> torch.Tensor:
    return original if sharded is None else sharded


def _without_output_cast(policy: MixedPrecisionPolicy) -> MixedPrecisionPolicy:
    """The policy for inner units: their outputs stay in the compute dtype for the next layer
    (a float32 output would meet the root's bf16 parameters); only the root casts its output."""
    return MixedPrecisionPolicy(
        param_dtype=policy.param_dtype,
        reduce_dtype=policy.reduce_dtype,
        output_dtype=None,
        cast_forward_inputs=policy.cast_forward_inputs,
    )


@contextlib.contextmanager
def _without_gradient_sync(model: nn.Module) -> Iterator[None]:
    # FSDP2 keeps this micro step's unsharded gradients and reduce-scatters them on the next sync.
    module = unwrap_module(model)
    if not isinstance(module, FSDPModule):
        yield
        return
    module.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        module.set_requires_gradient_sync(True)
