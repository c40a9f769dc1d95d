"""FullyShardedDataParallelPlugin: the settings of fully sharded training, checked when built.

Same class name and main fields as Hugging Face Accelerate's, so
`Accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(...))` runs on both. Only FSDP2
(`torch.distributed.fsdp.fully_shard`) is offered. This module does not import
torch.distributed.fsdp (three seconds of import): runtime/fsdp.py turns the settings into
torch's policies when a model is actually sharded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from runtime.process import LauncherSettings, split_names

WRAP_POLICIES = ("transformer_based_wrap", "size_based_wrap", "no_wrap")
_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
_POLICY_KEYS = ("param_dtype", "reduce_dtype", "output_dtype")


class FSDPSettingsError(ValueError):
    """A fully sharded setting that cannot be honoured (unknown name, wrong type, FSDP1)."""


@dataclass
class FullyShardedDataParallelPlugin:
    """Which modules become shards, and how they are kept between passes.

    * `transformer_cls_names_to_wrap` (list, or "A,B"): every module of these classes
      becomes its own shard unit; `min_num_params`: every module holding at least that many
      parameters not already in a smaller unit does. The whole model is always the last
      unit. `auto_wrap_policy` may name the rule ("transformer_based_wrap",
      "size_based_wrap", "no_wrap") or be a callable `module -> bool`; left out, it follows
      from which of the two fields is given (Accelerate then wraps nothing: state it there).
    * `reshard_after_forward`: free the gathered parameters after forward (less memory,
      one more all-gather in backward); False keeps them until backward (ZeRO-2 like).
    * `mixed_precision_policy`: "bf16" / "fp16" (parameters gathered, computed and
      gradients reduced in that dtype, full-precision shards kept; outputs in float32,
      where Accelerate's mapping leaves them in the low dtype), a dict of `param_dtype` /
      `reduce_dtype` / `output_dtype`, or a torch `MixedPrecisionPolicy`. Independent of
      `Accelerator(mixed_precision=...)`, which autocasts as it does without FSDP.
    * `cpu_offload`: keep parameter shards, gradients and optimizer state in CPU memory
      (True, or a torch `CPUOffloadPolicy`).
    """

    fsdp_version: int | None = None
    reshard_after_forward: bool = True
    auto_wrap_policy: str | Callable[[nn.Module], bool] | None = None
    transformer_cls_names_to_wrap: list[str] | str | None = None
    min_num_params: int | None = None
    mixed_precision_policy: Any = None
    cpu_offload: Any = False
    state_dict_type: str = field(default="SHARDED_STATE_DICT")

    def __post_init__(self) -> None:
        if self.fsdp_version not in (None, 2):
            raise FSDPSettingsError(
                f"fsdp_version={self.fsdp_version!r}: this runtime offers FSDP2 only "
                "(torch.distributed.fsdp.fully_shard); pass fsdp_version=2 or leave it out"
            )
        self.fsdp_version = 2
        if not isinstance(self.reshard_after_forward, bool):
            raise FSDPSettingsError(f"reshard_after_forward must be True or False, got {self.reshard_after_forward!r}")
        if isinstance(self.transformer_cls_names_to_wrap, str):
            self.transformer_cls_names_to_wrap = split_names(self.transformer_cls_names_to_wrap)
        if self.min_num_params is not None and (
            isinstance(self.min_num_params, bool) or not isinstance(self.min_num_params, int) or self.min_num_params < 1
        ):
            raise FSDPSettingsError(f"min_num_params must be a positive integer, got {self.min_num_params!r}")
        self.auto_wrap_policy = self._resolve_policy_name()
        _check_precision(self.mixed_precision_policy)
        if not isinstance(self.cpu_offload, bool) and not hasattr(self.cpu_offload, "pin_memory"):
            raise FSDPSettingsError(f"cpu_offload must be True, False or a CPUOffloadPolicy, got {self.cpu_offload!r}")
        self.state_dict_type = str(self.state_dict_type).upper()
        if self.state_dict_type not in ("SHARDED_STATE_DICT", "FULL_STATE_DICT"):
            raise FSDPSettingsError(
                f"state_dict_type={self.state_dict_type!r}: use SHARDED_STATE_DICT (save_state) "
                "or FULL_STATE_DICT (accepted; get_state_dict/save_model always gather the full one)"
            )

    def _resolve_policy_name(self) -> str | Callable[[nn.Module], bool]:
        policy = self.auto_wrap_policy
        if policy is None:
            if self.transformer_cls_names_to_wrap:
                return "transformer_based_wrap"
            return "size_based_wrap" if self.min_num_params else "no_wrap"
        if callable(policy):
            return policy
        name = str(policy).strip().lower()
        if name not in WRAP_POLICIES:
            raise FSDPSettingsError(f"auto_wrap_policy={policy!r} is not one of {', '.join(WRAP_POLICIES)} or a callable")
        if name == "transformer_based_wrap" and not self.transformer_cls_names_to_wrap:
            raise FSDPSettingsError("auto_wrap_policy='transformer_based_wrap' needs transformer_cls_names_to_wrap")
        if name == "size_based_wrap" and not self.min_num_params:
            raise FSDPSettingsError("auto_wrap_policy='size_based_wrap' needs min_num_params")
        return name

    @classmethod
    def from_launcher(cls, settings: LauncherSettings) -> FullyShardedDataParallelPlugin:
        """The settings `accel-launch --fsdp ...` passed through the environment."""
        kwargs: dict[str, Any] = {}
        if settings.fsdp_wrap_classes:
            kwargs["transformer_cls_names_to_wrap"] = list(settings.fsdp_wrap_classes)
        if settings.fsdp_min_num_params is not None:
            kwargs["min_num_params"] = settings.fsdp_min_num_params
        if settings.fsdp_reshard_after_forward is not None:
            kwargs["reshard_after_forward"] = settings.fsdp_reshard_after_forward
        if settings.fsdp_cpu_offload is not None:
            kwargs["cpu_offload"] = settings.fsdp_cpu_offload
        return cls(**kwargs)

    def precision_dtypes(self) -> dict[str, torch.dtype | None]:
        """The mixed precision policy as `MixedPrecisionPolicy` keyword arguments ({} for none)."""
        policy = self.mixed_precision_policy
        if policy is None:
            return {}
        if isinstance(policy, str):
            dtype = _dtype(policy)
            if dtype == torch.float32:
                return {}
            # Outputs in float32, as the runtime's autocast returns them: a loss against float32
            # targets would fail in backward on bf16 outputs (Accelerate's mapping casts them).
            return {"param_dtype": dtype, "reduce_dtype": dtype, "output_dtype": torch.float32}
        if isinstance(policy, dict):
            return {key: _dtype(value) for key, value in policy.items()}
        return {key: getattr(policy, key) for key in _POLICY_KEYS}


def _check_precision(policy: Any) -> None:
    if policy is None or hasattr(policy, "param_dtype"):
        return
    if isinstance(policy, str):
        _dtype(policy)
        return
    if isinstance(policy, dict):
        unknown = sorted(set(policy) - set(_POLICY_KEYS))
        if unknown:
            raise FSDPSettingsError(
                f"mixed_precision_policy has {', '.join(unknown)}; FSDP2 takes {', '.join(_POLICY_KEYS)}"
            )
        for value in policy.values():
            _dtype(value)
        return
    raise FSDPSettingsError(
        f"mixed_precision_policy must be 'bf16', 'fp16', a dict or a MixedPrecisionPolicy, got {policy!r}"
    )


def _dtype(value: Any) -> torch.dtype | None:
    if value is None or isinstance(value, torch.dtype):
        return value
    name = str(value).strip().lower()
    if name == "no":
        return torch.float32
    if name not in _DTYPES:
        raise FSDPSettingsError(f"mixed precision {value!r} is not one of {', '.join(_DTYPES)} or a torch dtype")
    return _DTYPES[name]
