"""The Accelerator facade: builds the runtime's parts once, then delegates to them.

Names and meanings follow Hugging Face Accelerate, so a script written for one runs on the
other; each deliberate difference is stated in the docstring concerned. No logic of its
own lives here beyond dispatching prepare() by object type.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import os
from typing import Any, Callable, Iterable, Iterator

import torch
from torch import nn
from torch.utils.data import DataLoader

from runtime import checkpoint, collectives, safetensors_io
from runtime.accumulation import GradientSync
from runtime.distributed import choose_strategy, compiled_module, full_tensor
from runtime.fsdp_plugin import FullyShardedDataParallelPlugin
from runtime.kwargs_handlers import ddp_options
from runtime.precision import Precision
from runtime.prepared.dataloader import PreparedDataLoader
from runtime.prepared.model import prepare_model, remove_autocast
from runtime.prepared.optimizer import PreparedOptimizer
from runtime.prepared.scheduler import PreparedScheduler
from runtime.process import DistributedType, LauncherSettings, ProcessInfo
from runtime.process_group import barrier, destroy_process_group, init_process_group

_KINDS = "torch.nn.Module, torch.optim.Optimizer, torch.utils.data.DataLoader and learning-rate schedulers"


class Accelerator:
    """Runs one training script on 1..N processes and several machines, unchanged.

    Started with plain `python train.py` it is a single process (GPU if there is one,
    else CPU). Under `accel-launch` (torchrun) it always joins the process group, on CPU
    too; unlike Accelerate, which on a CPU-only machine runs N unaware copies unless
    `cpu=True` is passed. `mixed_precision` and `cpu` default to what the launcher set.
    `fsdp_plugin` (else `accel-launch --fsdp`) shards every model over the processes.
    `kwargs_handlers=[DistributedDataParallelKwargs(...)]` sets the options of the DDP wrap.
    """

    def __init__(
        self,
        mixed_precision: str | None = None,
        gradient_accumulation_steps: int = 1,
        cpu: bool | None = None,
        device_placement: bool = True,
        split_batches: bool = False,
        even_batches: bool = True,
        step_scheduler_with_optimizer: bool = True,
        fsdp_plugin: FullyShardedDataParallelPlugin | None = None,
        kwargs_handlers: Iterable[object] | None = None,
    ) -> None:
        ddp_kwargs = ddp_options(kwargs_handlers)  # a wrong handler fails before any process group is joined
        launcher = LauncherSettings.from_env(os.environ)
        use_cpu = bool(launcher.cpu) if cpu is None else bool(cpu)
        cuda_devices = 0 if use_cpu else torch.cuda.device_count()
        self._info = ProcessInfo.from_env(os.environ, cpu=use_cpu, cuda_devices=cuda_devices)
        chosen = launcher.mixed_precision if mixed_precision is None else mixed_precision
        self._precision = Precision.for_device(chosen, self.device)
        self._created_group = init_process_group(self._info, launcher.process_group_timeout_s)
        if fsdp_plugin is None and launcher.use_fsdp:
            fsdp_plugin = FullyShardedDataParallelPlugin.from_launcher(launcher)
        self._strategy = choose_strategy(self._info, fsdp_plugin, ddp_kwargs)
        self._sync = GradientSync(gradient_accumulation_steps)
        self._objects = checkpoint.Checkpointables()
        self.device_placement = device_placement
        self.split_batches = split_batches
        self.even_batches = even_batches
        self.step_scheduler_with_optimizer = step_scheduler_with_optimizer

    # -- who and where --------------------------------------------------------------------

    @property
    def device(self) -> torch.device:
        return torch.device(self._info.device)

    @property
    def process_index(self) -> int:
        return self._info.rank

    @property
    def local_process_index(self) -> int:
        return self._info.local_rank

    @property
    def num_processes(self) -> int:
        return self._info.world_size

    @property
    def is_main_process(self) -> bool:
        return self._info.is_main_process

    @property
    def is_local_main_process(self) -> bool:
        return self._info.is_local_main_process

    @property
    def distributed_type(self) -> DistributedType:
        return self._strategy.distributed_type

    @property
    def mixed_precision(self) -> str:
        return self._precision.name

    @property
    def sync_gradients(self) -> bool:
        """False during an accumulation micro step: gradients are not synchronised yet."""
        return self._sync.sync_gradients

    @property
    def gradient_accumulation_steps(self) -> int:
        return self._sync.steps

    @gradient_accumulation_steps.setter
    def gradient_accumulation_steps(self, steps: int) -> None:
        self._sync.steps = steps

    @property
    def scaler(self) -> torch.amp.GradScaler | None:
        return self._precision.scaler

    # -- prepare ----------------------------------------------------------------------------

    def prepare(self, *objects: Any, device_placement: bool | None = None) -> Any:
        """Make models, optimizers, dataloaders and schedulers distributed-ready.

        Returns them in the order given (one object alone when given one). Optimizers are
        prepared before schedulers whatever the order, since a scheduler follows its optimizer.
        """
        place = self.device_placement if device_placement is None else device_placement
        kinds = [_kind_of(obj) for obj in objects]
        prepared = list(objects)
        for wanted in ("model", "optimizer", "dataloader", "scheduler"):
            for index, (obj, kind) in enumerate(zip(objects, kinds)):
                if kind == wanted:
                    prepared[index] = getattr(self, f"_prepare_{kind}")(obj, place)
        return prepared[0] if len(prepared) == 1 else tuple(prepared)

    def _prepare_model(self, model: nn.Module, place: bool) -> nn.Module:
        if any(model is known for known in self._objects.models):
            return model
        device = self.device if place and not self._strategy.places_model else None
        wrapped = prepare_model(model, self._strategy, self._precision, device)
        self._objects.models.append(wrapped)
        return wrapped

    def _prepare_optimizer(self, optimizer: torch.optim.Optimizer, place: bool) -> PreparedOptimizer:
        if isinstance(optimizer, PreparedOptimizer):
            return optimizer
        self._strategy.adopt_optimizer(optimizer)  # FSDP: the sharded parameters, not the originals
        if place and self.device_placement:
            _place_state(optimizer, self.device)
        prepared = PreparedOptimizer(optimizer, self._sync, self._precision)
        self._objects.optimizers.append(prepared)
        return prepared

    def _prepare_dataloader(self, loader: DataLoader, place: bool) -> PreparedDataLoader:
        if isinstance(loader, PreparedDataLoader):
            return loader
        prepared = PreparedDataLoader(
            loader,
            self._info,
            self._sync,
            self.device if place else None,
            split_batches=self.split_batches,
            even_batches=self.even_batches,
        )
        self._objects.dataloaders.append(prepared)
        return prepared

    def _prepare_scheduler(self, scheduler: Any, place: bool) -> PreparedScheduler:
        if isinstance(scheduler, PreparedScheduler):
            return scheduler
        owners = [o for o in self._objects.optimizers if scheduler.optimizer in (o, o.optimizer)]
        if not owners:
            raise ValueError(
                f"prepare() got the scheduler {type(scheduler).__name__} before its optimizer: "
                "pass the optimizer to prepare() too (in the same call or an earlier one)"
            )
        per_update = 1 if self.split_batches else self.num_processes
        prepared = PreparedScheduler(
            scheduler, owners, self._sync, per_update, step_with_optimizer=self.step_scheduler_with_optimizer
        )
        self._objects.schedulers.append(prepared)
        return prepared

    # -- the training step ------------------------------------------------------------------

    def backward(self, loss: torch.Tensor, **kwargs: Any) -> None:
        """`loss.backward()`, divided for accumulation and scaled under fp16."""
        if self._sync.steps > 1:
            loss = loss / self._sync.steps
        self._precision.scale_loss(loss).backward(**kwargs)

    def clip_grad_norm_(self, parameters: Iterable[torch.Tensor], max_norm: float, norm_type: float = 2.0) -> torch.Tensor:
        """Clip by total norm, after unscaling fp16 gradients; returns the norm before clipping.

        Under FSDP the norm covers every process's shards and is returned as a plain tensor.

        Under fp16 on an accumulation micro step (gradients still scaled and incomplete) it
        only reports the norm and clips nothing; clip when `sync_gradients` is True.
        """
        parameters = list(parameters)
        if self._scaled_micro_step():
            grads = [p.grad for p in parameters if p.grad is not None]
            if not grads:
                return torch.zeros((), device=self.device)
            return full_tensor(torch.nn.utils.get_total_norm(grads, norm_type)) / self._precision.loss_scale
        self._precision.unscale_all(o.optimizer for o in self._objects.optimizers)
        return full_tensor(torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type))

    def clip_grad_value_(self, parameters: Iterable[torch.Tensor], clip_value: float) -> None:
        """Clip each gradient element to [-clip_value, clip_value], after unscaling fp16 gradients.

        Like clip_grad_norm_, it leaves still-scaled fp16 gradients of a micro step alone.
        """
        if self._scaled_micro_step():
            return
        self._precision.unscale_all(o.optimizer for o in self._objects.optimizers)
        torch.nn.utils.clip_grad_value_(parameters, clip_value)

    def _scaled_micro_step(self) -> bool:
        return self._precision.scaler is not None and not self._sync.sync_gradients

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Run the enclosed code in the chosen mixed precision (prepared models already do)."""
        return self._precision.autocast()

    @contextlib.contextmanager
    def accumulate(self, *models: nn.Module) -> Iterator[None]:
        """One micro step: gradients are synchronised (and the optimizer steps) only on the last."""
        self._sync.advance()
        with contextlib.ExitStack() as stack:
            if not self._sync.sync_gradients:
                for model in models:
                    stack.enter_context(self._strategy.no_sync(model))
            yield

    def no_sync(self, model: nn.Module) -> contextlib.AbstractContextManager[None]:
        """Skip the gradient all-reduce for the enclosed backward passes."""
        return self._strategy.no_sync(model)

    # -- across processes -------------------------------------------------------------------

    def gather(self, tensor: Any) -> Any:
        """Concatenate tensors from every process along dim 0 (nested structures too)."""
        return collectives.gather(tensor)

    def gather_for_metrics(self, input_data: Any, use_gather_object: bool = False) -> Any:
        """Gather, dropping the samples repeated to even out the last batch."""
        return collectives.gather_for_metrics(input_data, self._sync, use_gather_object, self.device)

    def reduce(self, tensor: Any, reduction: str = "sum", scale: float = 1.0) -> Any:
        return collectives.reduce(tensor, reduction, scale)

    def pad_across_processes(self, tensor: Any, dim: int = 0, pad_index: Any = 0, pad_first: bool = False) -> Any:
        return collectives.pad_across_processes(tensor, dim, pad_index, pad_first)

    def wait_for_everyone(self) -> None:
        barrier(self._info)

    @contextlib.contextmanager
    def main_process_first(self) -> Iterator[None]:
        """The main process runs the block first (e.g. to download), then the others."""
        if not self.is_main_process:
            self.wait_for_everyone()
        yield
        if self.is_main_process:
            self.wait_for_everyone()

    @contextlib.contextmanager
    def split_between_processes(self, inputs: Any, apply_padding: bool = False) -> Iterator[Any]:
        """Yield this process's contiguous share of a list, tuple, dict of lists, or tensor."""
        yield collectives.split_between_processes(inputs, self.process_index, self.num_processes, apply_padding)

    def on_main_process(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator: run `function` on the main process only (elsewhere it returns None)."""
        return _only_if(lambda: self.is_main_process, function)

    def on_local_main_process(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator: run `function` on each machine's local main process only."""
        return _only_if(lambda: self.is_local_main_process, function)

    def print(self, *args: Any, **kwargs: Any) -> None:
        """print() once per machine (the local main process), as Accelerate does."""
        if self.is_local_main_process:
            builtins.print(*args, **kwargs)

    # -- models and checkpoints -------------------------------------------------------------

    def unwrap_model(self, model: nn.Module, keep_fp32_wrapper: bool = True, keep_torch_compile: bool = True) -> nn.Module:
        """The user's own module, without DistributedDataParallel around it.

        A module the user compiled stays compiled, as in Accelerate: its `state_dict()`
        keys keep torch.compile's `_orig_mod.` prefix, as the script's own saves had them.
        `keep_torch_compile=False` returns the module inside."""
        unwrapped = self._strategy.unwrap_model(model)
        if not keep_fp32_wrapper:
            unwrapped = remove_autocast(unwrapped)
        compiled = compiled_module(model) if keep_torch_compile else None
        return compiled if compiled is not None else unwrapped

    def get_state_dict(self, model: nn.Module, unwrap: bool = True) -> dict[str, torch.Tensor]:
        """The model's full state dict; under FSDP gathered on the main process's CPU ({} elsewhere).

        Every process must call it under FSDP (it gathers). `unwrap=False` keeps the
        wrapper's key names (`module.` under DDP).
        """
        if not unwrap:
            return model.state_dict()
        return self._strategy.full_state_dict(model)

    def save(self, obj: Any, f: Any) -> None:
        """torch.save on the main process only, so N processes do not write one file N times."""
        if self.is_main_process:
            torch.save(obj, f)

    def save_model(
        self,
        model: nn.Module,
        save_directory: str | os.PathLike[str],
        max_shard_size: int | str = "10GB",
        safe_serialization: bool = True,
    ) -> None:
        """Write the unwrapped weights as `model.safetensors` (or `pytorch_model.bin` with
        `safe_serialization=False`), split by `max_shard_size` with an index, main process only.

        Every process must call it. Unlike Accelerate, tied weights are written under every
        name (as copies), so `model.load_state_dict(load_file(...))` works as it is.
        """
        state = self.get_state_dict(model)
        if self.is_main_process:
            safetensors_io.write_model_files(state, save_directory, max_shard_size, safe_serialization)
        self.wait_for_everyone()

    def register_for_checkpointing(self, *objects: Any) -> None:
        """Include objects with state_dict/load_state_dict in save_state and load_state."""
        for obj in objects:
            if not (hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict")):
                raise TypeError(f"{type(obj).__name__} has no state_dict/load_state_dict to checkpoint")
            self._objects.custom.append(obj)

    def save_state(self, output_dir: str | os.PathLike[str]) -> str:
        """Save models, optimizers, schedulers, dataloader positions, scaler and RNG states.

        Under FSDP models and optimizers are written sharded (torch.distributed.checkpoint),
        each process its own part; resume on the same number of processes.

        Unlike Accelerate, `output_dir` is required (there is no automatic naming).
        """
        path = self._strategy.save_state(output_dir, self._objects, self._precision, self._info)
        self.wait_for_everyone()
        return str(path)

    def load_state(self, input_dir: str | os.PathLike[str]) -> None:
        """Restore a save_state checkpoint; the next pass over a dataloader resumes mid-epoch."""
        self.wait_for_everyone()
        self._strategy.load_state(input_dir, self._objects, self._precision, self._info)

    def end_training(self) -> None:
        """Wait for every process, then leave the process group this Accelerator formed."""
        self.wait_for_everyone()
        destroy_process_group(self._created_group)
        self._created_group = False

    def __repr__(self) -> str:
        info = self._info
        return (
            f"Accelerator(process {info.rank}/{info.world_size}, device={info.device}, "
            f"mixed_precision={self.mixed_precision!r}, distributed_type={self.distributed_type.value})"
        )


def _only_if(condition: Callable[[], bool], function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs) if condition() else None

    return guarded


def _kind_of(obj: Any) -> str:
    if isinstance(obj, nn.Module):
        return "model"
    if isinstance(obj, torch.optim.Optimizer):
        return "optimizer"
    if isinstance(obj, DataLoader):
        return "dataloader"
    if isinstance(obj, (torch.optim.lr_scheduler.LRScheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)):
        return "scheduler"
    if isinstance(obj, PreparedScheduler):
        return "scheduler"
    raise TypeError(f"prepare() does not know how to prepare a {type(obj).__qualname__}; it takes {_KINDS}")


def _place_state(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """Move the optimizer's state (Adam's moments of a resumed run) to this process's
    device, as Accelerate does: an optimizer pickled whole, or loaded from a checkpoint
    written on another device, keeps its state where it was saved (`cuda:0` on every
    rank) and its step fails beside parameters on `cuda:1`."""
    for state in optimizer.state.values():
        for key, value in list(state.items()):
            if isinstance(value, torch.Tensor) and value.device != device and key != "step":
                state[key] = value.to(device)
