"""FullyShardedDataParallelPlugin, the launcher's ACCEL_FSDP_* variables and the choice of shard
units: pure parsing and module walking, no processes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from runtime import FullyShardedDataParallelPlugin
from runtime.fsdp_plugin import FSDPSettingsError
from runtime.process import (
    ENV_FSDP_CPU_OFFLOAD,
    ENV_FSDP_MIN_NUM_PARAMS,
    ENV_FSDP_RESHARD_AFTER_FORWARD,
    ENV_FSDP_WRAP_CLASSES,
    ENV_USE_FSDP,
    LaunchEnvError,
    LauncherSettings,
)


class Block(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.linear = nn.Linear(width, width)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(2, 8)  # 24 elements
        self.blocks = nn.ModuleList([Block(), Block()])  # 72 each
        self.head = nn.Linear(8, 1)  # 9


def test_launcher_settings_read_every_fsdp_variable():
    env = {
        ENV_USE_FSDP: "1",
        ENV_FSDP_WRAP_CLASSES: "Block, Attention",
        ENV_FSDP_MIN_NUM_PARAMS: "1000",
        ENV_FSDP_RESHARD_AFTER_FORWARD: "false",
        ENV_FSDP_CPU_OFFLOAD: "yes",
    }
    settings = LauncherSettings.from_env(env)
    assert settings.use_fsdp is True
    assert settings.fsdp_wrap_classes == ("Block", "Attention")
    assert settings.fsdp_min_num_params == 1000
    assert settings.fsdp_reshard_after_forward is False
    assert settings.fsdp_cpu_offload is True
    assert LauncherSettings.from_env(settings.to_env()) == settings


def test_unset_fsdp_variables_mean_not_given():
    settings = LauncherSettings.from_env({})
    assert (settings.use_fsdp, settings.fsdp_wrap_classes, settings.fsdp_min_num_params) == (None, None, None)
    assert settings.to_env() == {}


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [(ENV_USE_FSDP, "maybe", "not a boolean"), (ENV_FSDP_MIN_NUM_PARAMS, "1e6", "not an integer")],
)
def test_bad_fsdp_variables_name_the_variable(key, value, message):
    with pytest.raises(LaunchEnvError, match=f"{key}.*{message}"):
        LauncherSettings.from_env({key: value})


def test_plugin_from_launcher_carries_the_settings():
    settings = LauncherSettings(use_fsdp=True, fsdp_wrap_classes=("Block",), fsdp_reshard_after_forward=False, fsdp_cpu_offload=True)
    plugin = FullyShardedDataParallelPlugin.from_launcher(settings)
    assert plugin.transformer_cls_names_to_wrap == ["Block"]
    assert plugin.auto_wrap_policy == "transformer_based_wrap"
    assert plugin.reshard_after_forward is False and plugin.cpu_offload is True


def test_wrap_policy_follows_the_fields_given():
    assert FullyShardedDataParallelPlugin().auto_wrap_policy == "no_wrap"
    assert FullyShardedDataParallelPlugin(min_num_params=10).auto_wrap_policy == "size_based_wrap"
    by_name = FullyShardedDataParallelPlugin(auto_wrap_policy="TRANSFORMER_BASED_WRAP", transformer_cls_names_to_wrap="A,B")
    assert by_name.auto_wrap_policy == "transformer_based_wrap" and by_name.transformer_cls_names_to_wrap == ["A", "B"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fsdp_version": 1}, "FSDP2 only"),
        ({"auto_wrap_policy": "layer_wrap"}, "not one of"),
        ({"auto_wrap_policy": "size_based_wrap"}, "needs min_num_params"),
        ({"auto_wrap_policy": "transformer_based_wrap"}, "needs transformer_cls_names_to_wrap"),
        ({"min_num_params": 0}, "positive integer"),
        ({"reshard_after_forward": "FULL_SHARD"}, "True or False"),
        ({"mixed_precision_policy": "fp8"}, "not one of"),
        ({"mixed_precision_policy": {"buffer_dtype": "bf16"}}, "FSDP2 takes"),
        ({"cpu_offload": "yes"}, "CPUOffloadPolicy"),
    ],
)
def test_impossible_settings_are_refused_with_the_reason(kwargs, message):
    with pytest.raises(FSDPSettingsError, match=message):
        FullyShardedDataParallelPlugin(**kwargs)


def test_mixed_precision_policy_forms():
    assert FullyShardedDataParallelPlugin().precision_dtypes() == {}
    bf16 = FullyShardedDataParallelPlugin(mixed_precision_policy="bf16").precision_dtypes()
    assert bf16 == {"param_dtype": torch.bfloat16, "reduce_dtype": torch.bfloat16, "output_dtype": torch.float32}
    mixed = FullyShardedDataParallelPlugin(mixed_precision_policy={"param_dtype": "bf16", "reduce_dtype": torch.float32})
    assert mixed.precision_dtypes() == {"param_dtype": torch.bfloat16, "reduce_dtype": torch.float32}
    from torch.distributed.fsdp import MixedPrecisionPolicy

    policy = FullyShardedDataParallelPlugin(mixed_precision_policy=MixedPrecisionPolicy(param_dtype=torch.float16))
    assert policy.precision_dtypes()["param_dtype"] == torch.float16


def test_shard_units_by_class_name_and_by_size_children_first():
    from runtime.fsdp import shard_units

    model = Net()
    by_class = shard_units(model, FullyShardedDataParallelPlugin(transformer_cls_names_to_wrap=["Block"]))
    assert by_class == [model.blocks[1], model.blocks[0]]
    # 72 elements in each block's layer: the smallest module reaching the size is the unit (as
    # in FSDP1's rule); the input layer (24) and head (9) stay with the root.
    by_size = shard_units(model, FullyShardedDataParallelPlugin(min_num_params=50))
    assert list(map(id, by_size)) == [id(model.blocks[0].linear), id(model.blocks[1].linear)]
    # 20: the input layer too; blocks and their list hold nothing left over once their layers are units.
    by_size = shard_units(model, FullyShardedDataParallelPlugin(min_num_params=20))
    assert list(map(id, by_size)) == [id(model.inp), id(model.blocks[0].linear), id(model.blocks[1].linear)]
    assert shard_units(model, FullyShardedDataParallelPlugin()) == []
    custom = shard_units(model, FullyShardedDataParallelPlugin(auto_wrap_policy=lambda m: isinstance(m, nn.Linear)))
    assert len(custom) == 4 and model not in custom


def test_unknown_class_name_lists_the_models_classes():
    from runtime.fsdp import shard_units

    with pytest.raises(FSDPSettingsError, match="no module of class Layer in Net.*Block"):
        shard_units(Net(), FullyShardedDataParallelPlugin(transformer_cls_names_to_wrap=["Layer"]))


def test_plain_python_run_ignores_the_plugin():
    from runtime import Accelerator

    acc = Accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(min_num_params=10))
    assert acc.distributed_type.value == "NO"
    model = acc.prepare(nn.Linear(2, 2))
    assert isinstance(model, nn.Linear) and type(model) is nn.Linear
