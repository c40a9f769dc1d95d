"""Who this process is: rank, world size, device and backend, read once from the environment.

Every environment variable name the runtime and the launcher share is a constant here and
nowhere else. Parsing is pure (it takes a mapping), so it is unit-tested without processes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Mapping

# Set by torchrun (torch.distributed.run) for every worker.
ENV_RANK = "RANK"
ENV_LOCAL_RANK = "LOCAL_RANK"
ENV_WORLD_SIZE = "WORLD_SIZE"
ENV_LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE"
ENV_NODE_RANK = "GROUP_RANK"
ENV_MASTER_ADDR = "MASTER_ADDR"
ENV_MASTER_PORT = "MASTER_PORT"
# Where torchrun wants a worker to record its uncaught exception (torchrun's error-file protocol).
ENV_ERROR_FILE = "TORCHELASTIC_ERROR_FILE"

# Set by accel-launch for the script; a setting the script passes itself wins.
ENV_MIXED_PRECISION = "ACCEL_MIXED_PRECISION"
MIXED_PRECISION_CHOICES = ("no", "fp16", "bf16")
ENV_USE_CPU = "ACCEL_USE_CPU"
# Seconds the process group may take to form (torch's default when unset).
ENV_PROCESS_GROUP_TIMEOUT = "ACCEL_PROCESS_GROUP_TIMEOUT"
# Fully sharded training (FSDP2), set by `accel-launch --fsdp ...`.
ENV_USE_FSDP = "ACCEL_USE_FSDP"
ENV_FSDP_WRAP_CLASSES = "ACCEL_FSDP_WRAP_CLASSES"
ENV_FSDP_MIN_NUM_PARAMS = "ACCEL_FSDP_MIN_NUM_PARAMS"
ENV_FSDP_RESHARD_AFTER_FORWARD = "ACCEL_FSDP_RESHARD_AFTER_FORWARD"
ENV_FSDP_CPU_OFFLOAD = "ACCEL_FSDP_CPU_OFFLOAD"

# Threads per worker, read by torch; torchrun prints a banner when it has to pick a value.
ENV_OMP_NUM_THREADS = "OMP_NUM_THREADS"
ENV_PYTHONHASHSEED = "PYTHONHASHSEED"  # one str-hash seed for all processes (launch/command.py)
# torchrun's --tee and --redirects given through the environment: torchrun then handles
# (and prefixes) the workers' output itself.
ENV_TORCHRUN_TEE = "PET_TEE"
ENV_TORCHRUN_REDIRECTS = "PET_REDIRECTS"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class DistributedType(str, enum.Enum):
    """How the processes train together; values are Hugging Face Accelerate's names."""

    NO = "NO"
    MULTI_CPU = "MULTI_CPU"
    MULTI_GPU = "MULTI_GPU"
    FSDP = "FSDP"


class LaunchEnvError(ValueError):
    """The environment describes a launch that cannot be right (a typo or a half-set job)."""


@dataclass(frozen=True)
class LauncherSettings:
    """Settings accel-launch passes to the script; None means "not given"."""

    mixed_precision: str | None = None
    cpu: bool | None = None
    process_group_timeout_s: float | None = None
    use_fsdp: bool | None = None
    fsdp_wrap_classes: tuple[str, ...] | None = None
    fsdp_min_num_params: int | None = None
    fsdp_reshard_after_forward: bool | None = None
    fsdp_cpu_offload: bool | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> LauncherSettings:
        """Read the launcher's settings; the script's own arguments override them later."""
        precision = env.get(ENV_MIXED_PRECISION) or None
        cpu = _parse_bool(env, ENV_USE_CPU) if ENV_USE_CPU in env else None
        timeout = env.get(ENV_PROCESS_GROUP_TIMEOUT)
        classes = env.get(ENV_FSDP_WRAP_CLASSES)
        min_params = env.get(ENV_FSDP_MIN_NUM_PARAMS)
        return cls(
            mixed_precision=precision.lower() if precision else None,
            cpu=cpu,
            process_group_timeout_s=_parse_float(ENV_PROCESS_GROUP_TIMEOUT, timeout)
            if timeout
            else None,
            use_fsdp=_optional_bool(env, ENV_USE_FSDP),
            fsdp_wrap_classes=tuple(split_names(classes)) if classes else None,
            fsdp_min_num_params=_parse_int(env, ENV_FSDP_MIN_NUM_PARAMS) if min_params else None,
            fsdp_reshard_after_forward=_optional_bool(env, ENV_FSDP_RESHARD_AFTER_FORWARD),
            fsdp_cpu_offload=_optional_bool(env, ENV_FSDP_CPU_OFFLOAD),
        )

    def to_env(self) -> dict[str, str]:
        """The inverse of from_env, used by the launcher; unset settings are left out."""
        env: dict[str, str] = {}
        if self.mixed_precision is not None:
            env[ENV_MIXED_PRECISION] = self.mixed_precision
        if self.cpu is not None:
            env[ENV_USE_CPU] = "1" if self.cpu else "0"
        if self.process_group_timeout_s is not None:
            env[ENV_PROCESS_GROUP_TIMEOUT] = str(self.process_group_timeout_s)
        flags = {
            ENV_USE_FSDP: self.use_fsdp,
            ENV_FSDP_RESHARD_AFTER_FORWARD: self.fsdp_reshard_after_forward,
            ENV_FSDP_CPU_OFFLOAD: self.fsdp_cpu_offload,
        }
        env.update({key: "1" if value else "0" for key, value in flags.items() if value is not None})
        if self.fsdp_wrap_classes is not None:
            env[ENV_FSDP_WRAP_CLASSES] = ",".join(self.fsdp_wrap_classes)
        if self.fsdp_min_num_params is not None:
            env[ENV_FSDP_MIN_NUM_PARAMS] = str(self.fsdp_min_num_params)
        return env


@dataclass(frozen=True)
class ProcessInfo:
    """This process's place in the job. Built once by the Accelerator and passed explicitly.

    `launched` is True whenever torchrun's variables are present, even for one process:
    then the process group always forms, on CPU as well as GPU.
    """

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None
    launched: bool = False
    device: str = "cpu"

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, cpu: bool, cuda_devices: int) -> ProcessInfo:
        """Parse torchrun's variables; `cuda_devices` is passed in so this stays pure."""
        if ENV_WORLD_SIZE not in env and ENV_RANK not in env:
            return cls(device=_pick_device(0, cpu, cuda_devices))
        missing = [k for k in (ENV_RANK, ENV_WORLD_SIZE, ENV_MASTER_ADDR, ENV_MASTER_PORT) if k not in env]
        if missing:
            raise LaunchEnvError(
                f"incomplete distributed environment: {', '.join(missing)} not set "
                f"(start the script with accel-launch, or with plain python and none of these)"
            )
        rank = _parse_int(env, ENV_RANK)
        world = _parse_int(env, ENV_WORLD_SIZE)
        local_rank = _parse_int(env, ENV_LOCAL_RANK, default=rank)
        local_world = _parse_int(env, ENV_LOCAL_WORLD_SIZE, default=world)
        if world < 1 or not 0 <= rank < world:
            raise LaunchEnvError(f"{ENV_RANK}={rank} is outside {ENV_WORLD_SIZE}={world}")
        if not 0 <= local_rank < local_world:
            raise LaunchEnvError(f"{ENV_LOCAL_RANK}={local_rank} is outside {ENV_LOCAL_WORLD_SIZE}={local_world}")
        return cls(
            rank=rank,
            local_rank=local_rank,
            world_size=world,
            local_world_size=local_world,
            node_rank=_parse_int(env, ENV_NODE_RANK, default=rank // local_world),
            master_addr=env[ENV_MASTER_ADDR],
            master_port=_parse_int(env, ENV_MASTER_PORT),
            launched=True,
            device=_pick_device(local_rank, cpu, cuda_devices),
        )

    @property
    def backend(self) -> str:
        """NCCL for GPUs, gloo for CPUs: the pairing torch.distributed recommends."""
        return "nccl" if self.device.startswith("cuda") else "gloo"

    @property
    def distributed_type(self) -> DistributedType:
        if self.world_size == 1:
            return DistributedType.NO
        return DistributedType.MULTI_GPU if self.device.startswith("cuda") else DistributedType.MULTI_CPU

    @property
    def is_main_process(self) -> bool:
        return self.rank == 0

    @property
    def is_local_main_process(self) -> bool:
        return self.local_rank == 0


def _pick_device(local_rank: int, cpu: bool, cuda_devices: int) -> str:
    if cpu or cuda_devices == 0:
        return "cpu"
    if local_rank >= cuda_devices:
        raise LaunchEnvError(
            f"{ENV_LOCAL_RANK}={local_rank} but this machine has {cuda_devices} GPU(s): "
            f"start at most {cuda_devices} processes per node, or pass --cpu"
        )
    return f"cuda:{local_rank}"


def _parse_int(env: Mapping[str, str], key: str, default: int | None = None) -> int:
    raw = env.get(key)
    if raw is None or raw == "":
        if default is None:
            raise LaunchEnvError(f"{key} is not set")
        return default
    try:
        return int(raw)
    except ValueError:
        raise LaunchEnvError(f"{key}={raw!r} is not an integer") from None


def _parse_float(key: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise LaunchEnvError(f"{key}={raw!r} is not a number") from None
    if value <= 0:
        raise LaunchEnvError(f"{key}={raw!r} must be positive")
    return value


def split_names(raw: str) -> list[str]:
    """Split a comma-separated list of class names: "Block, Head" gives ["Block", "Head"]."""
    return [name.strip() for name in raw.split(",") if name.strip()]


def _optional_bool(env: Mapping[str, str], key: str) -> bool | None:
    return _parse_bool(env, key) if key in env else None


def _parse_bool(env: Mapping[str, str], key: str) -> bool:
    raw = env.get(key, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise LaunchEnvError(f"{key}={raw!r} is not a boolean (use 1 or 0)")
