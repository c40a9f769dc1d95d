"""save_model's files: safetensors or .bin, one file or shards with a Hugging Face index."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from runtime import Accelerator
from runtime.safetensors_io import parse_size, split_into_shards, write_model_files


class Tied(nn.Module):
    """An embedding and an output layer sharing one weight, as language models do."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight


def _assert_equal(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys()
    for key, tensor in expected.items():
        assert torch.equal(actual[key], tensor), key


def test_save_model_writes_one_safetensors_file_equal_to_the_state_dict(tmp_path):
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    acc = Accelerator(cpu=True)
    prepared = acc.prepare(model)
    acc.save_model(prepared, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]
    _assert_equal(load_file(tmp_path / "model.safetensors"), model.state_dict())


def test_small_max_shard_size_gives_shards_and_an_index_covering_every_key(tmp_path):
    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(4)])  # 4 x 288 bytes
    acc = Accelerator(cpu=True)
    acc.save_model(acc.prepare(model), tmp_path, max_shard_size=600)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    state = model.state_dict()
    assert index["weight_map"].keys() == state.keys()
    assert index["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in state.values())
    files = sorted(set(index["weight_map"].values()))
    assert files == [f"model-0000{i}-of-00002.safetensors" for i in (1, 2)]
    assert not (tmp_path / "model.safetensors").exists()
    loaded = {}
    for name in files:
        shard = load_file(tmp_path / name)
        assert sum(t.numel() * t.element_size() for t in shard.values()) <= 600
        loaded.update(shard)
    _assert_equal(loaded, state)


def test_bin_variant_one_file_and_sharded(tmp_path):
    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(4)])
    acc = Accelerator(cpu=True)
    acc.save_model(model, tmp_path / "one", safe_serialization=False)
    _assert_equal(torch.load(tmp_path / "one" / "pytorch_model.bin", weights_only=True), model.state_dict())
    acc.save_model(model, tmp_path / "many", max_shard_size="1KB", safe_serialization=False)
    index = json.loads((tmp_path / "many" / "pytorch_model.bin.index.json").read_text())
    loaded = {}
    for name in sorted(set(index["weight_map"].values())):
        assert name.startswith("pytorch_model-") and name.endswith("-of-00002.bin")
        loaded.update(torch.load(tmp_path / "many" / name, weights_only=True))
    _assert_equal(loaded, model.state_dict())


def test_tied_weights_are_written_under_every_name_and_load_strictly(tmp_path):
    model = Tied()
    write_model_files(model.state_dict(), tmp_path)
    loaded = load_file(tmp_path / "model.safetensors")
    _assert_equal(loaded, model.state_dict())
    fresh = Tied()
    fresh.load_state_dict(loaded)  # strict: no key missing
    assert torch.equal(fresh.head.weight, model.embed.weight)


def test_a_new_save_removes_the_shards_of_an_earlier_one(tmp_path):
    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(4)])
    write_model_files(model.state_dict(), tmp_path, max_shard_size=600)
    write_model_files(model.state_dict(), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]


def test_sizes_and_shard_rule():
    assert parse_size("10GB") == 10**10
    assert parse_size("2GiB") == 2 * 2**30
    assert parse_size("500 mb") == 500 * 10**6
    assert parse_size(123) == 123
    with pytest.raises(ValueError, match="not a size"):
        parse_size("ten gigs")
    tensors = {"a": torch.zeros(10), "big": torch.zeros(100), "c": torch.zeros(5)}
    shards = split_into_shards(tensors, max_bytes=60)
    assert [list(s) for s in shards] == [["a"], ["big"], ["c"]]  # the big one alone, order kept
