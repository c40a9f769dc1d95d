"""runtime/launch/config.py: [tool.accel-launch] found upward, checked, and overridden by flags."""

from __future__ import annotations

import pytest

from runtime.launch.config import LaunchFileError, load_defaults


def test_nearest_pyproject_upward_and_flags_win(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.accel-launch]\nprocesses = 4\nmachines = 2\nmixed-precision = "BF16"\ncpu = true\n'
        'fsdp = true\nfsdp-wrap-classes = "Block, Head"\nfsdp_min_num_params = 100\n'
    )
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    defaults = load_defaults(deep)
    assert defaults.path == tmp_path / "pyproject.toml"
    assert defaults.values == {
        "nproc_per_node": 4, "nnodes": 2, "mixed_precision": "bf16", "cpu": True,
        "fsdp": True, "fsdp_wrap_classes": ("Block", "Head"), "fsdp_min_num_params": 100,
    }  # fmt: skip
    merged = defaults.merged({"nproc_per_node": 1, "cpu": None, "fsdp": None})
    assert (merged["nproc_per_node"], merged["cpu"], merged["fsdp"]) == (1, True, True)
    off = defaults.merged({"fsdp": False})
    assert off["fsdp"] is False and not any(key.startswith("fsdp_") for key in off)


def test_no_table_or_no_file_gives_empty_defaults(tmp_path):
    assert load_defaults(tmp_path).path is None  # no pyproject.toml here or above
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    defaults = load_defaults(tmp_path)
    assert (defaults.values, defaults.path) == ({}, None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tool.accel-launch]\nnproc = 2\n", "unknown setting 'nproc'"),
        ("[tool.accel-launch]\nnproc_per_node = '2'\n", "nproc_per_node = '2' has the wrong type"),
        ("[tool.accel-launch]\ncpu = 1\n", "wrong type"),
        ("[tool.accel-launch]\nnnodes = true\n", "wrong type"),
        ("[tool.accel-launch\n", "cannot read it"),
    ],
)
def test_bad_tables_name_the_file(tmp_path, text, message):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(LaunchFileError, match=message) as error:
        load_defaults(tmp_path)
    assert str(tmp_path / "pyproject.toml") in str(error.value)
