"""accel-launch through the real command line: `env`, pyproject defaults, flags winning, quiet output."""

from __future__ import annotations

import platform
import re

from tests.runtime.integration.harness import SCRIPTS, launcher, run

_PYPROJECT = """
[project]
name = "someone-elses-project"

[tool.accel-launch]
nproc_per_node = 2
mixed-precision = "bf16"
fsdp = true
fsdp_wrap_classes = ["Block", "Head"]
"""


def _reports(output: str) -> list[str]:
    return sorted(line.split("WORLD_SIZE=", 1)[1] for line in output.splitlines() if "WORLD_SIZE=" in line)


def test_env_reports_versions_devices_and_the_settings_in_effect(tmp_path):
    import torch

    (tmp_path / "pyproject.toml").write_text(_PYPROJECT)
    (tmp_path / "sub").mkdir()
    result = run([*launcher(), "env"], cwd=tmp_path / "sub", timeout=120, env={"OMP_NUM_THREADS": None}).check()
    out = result.output
    for expected in (torch.__version__, platform.python_version(), "accel-migrate", "gloo", str(tmp_path / "pyproject.toml")):
        assert expected in out, f"{expected!r} missing from:\n{out}"
    assert re.search(r"nproc_per_node\s+2\n", out) and re.search(r"mixed_precision\s+bf16\n", out), out
    assert re.search(r"fsdp_wrap_classes\s+Block, Head\n", out), out
    assert re.search(r"OMP_NUM_THREADS\s+\d+ \(set by accel-launch", out), out


def test_pyproject_defaults_launch_and_flags_win(tmp_path):
    (tmp_path / "pyproject.toml").write_text(_PYPROJECT)
    script = str(SCRIPTS / "launch_report.py")
    result = run([*launcher(), script], cwd=tmp_path, timeout=120).check()
    assert _reports(result.output) == ["2 ACCEL_MIXED_PRECISION=bf16 ACCEL_USE_FSDP=1 ACCEL_FSDP_WRAP_CLASSES=Block,Head OMP_NUM_THREADS=1"] * 2
    flags = ["--nproc-per-node", "1", "--mixed-precision", "no", "--no-fsdp"]
    result = run([*launcher(), *flags, script], cwd=tmp_path, timeout=120).check()
    assert _reports(result.output) == ["1 ACCEL_MIXED_PRECISION=no ACCEL_USE_FSDP=- ACCEL_FSDP_WRAP_CLASSES=- OMP_NUM_THREADS=1"]
    # torchrun's spellings, as users type them from habit
    flags = ["--nproc_per_node", "1", "--master_addr", "127.0.0.1", "--node_rank", "0", "--mixed-precision", "no"]
    result = run([*launcher(), *flags, script], cwd=tmp_path, timeout=120).check()
    assert _reports(result.output) == ["1 ACCEL_MIXED_PRECISION=no ACCEL_USE_FSDP=1 ACCEL_FSDP_WRAP_CLASSES=Block,Head OMP_NUM_THREADS=1"]


def test_a_bad_pyproject_table_is_one_line_naming_the_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.accel-launch]\nnproc = 2\n")
    # A narrow terminal must not fold the path (rich's error box did, at CI's width).
    result = run([*launcher(), str(SCRIPTS / "launch_report.py")], cwd=tmp_path, timeout=120, env={"COLUMNS": "40"})
    assert result.returncode == 2
    path = str(tmp_path / "pyproject.toml")
    assert any(path in line and "unknown setting 'nproc'" in line for line in result.output.splitlines()), result.output
    assert "Traceback" not in result.output


def test_two_processes_are_quiet_and_prefixed_one_process_is_plain(tmp_path):
    # The user's environment as it comes: no thread count, warnings shown.
    plain = {"OMP_NUM_THREADS": None, "PYTHONWARNINGS": None}
    script = str(SCRIPTS / "prepared_model.py")
    output = run([*launcher(), "--nproc-per-node", "2", script, "--out", str(tmp_path)], cwd=tmp_path, env=plain).check().output
    assert "OMP_NUM_THREADS" not in output, f"torchrun's banner is back:\n{output}"
    assert "NumPy" not in output and "numpy" not in output, output
    assert "*****" not in output, output
    one = run([*launcher(), "--nproc-per-node", "1", str(SCRIPTS / "launch_report.py")], cwd=tmp_path, env=plain).check()
    assert one.output.startswith("WORLD_SIZE=1 "), f"one process prints as it is:\n{one.output}"
    two = run([*launcher(), "--nproc-per-node", "2", str(SCRIPTS / "launch_report.py")], cwd=tmp_path, env=plain).check()
    assert sorted(line.split(" ", 1)[0] for line in two.output.splitlines()) == ["[rank0]:", "[rank1]:"], two.output


def test_every_process_iterates_a_set_of_words_in_the_same_order(tmp_path):
    # Without one PYTHONHASHSEED, list(set(words)) would number a vocabulary differently per rank.
    result = run([*launcher(), "--nproc-per-node", "2", str(SCRIPTS / "hash_order.py")], cwd=tmp_path,
                 env={"PYTHONHASHSEED": None}).check()
    orders = {line.split(" ", 2)[2] for line in result.output.splitlines() if " rank" in line}
    assert len(orders) == 1 and len(result.output.splitlines()) == 2, result.output


def test_the_process_group_timeout_bounds_how_long_the_others_wait(tmp_path):
    # stargan-v2's evaluation on the main process alone, the others at the barrier (reader R2):
    # past the group's timeout they fail; a longer one lets them through.
    script = str(SCRIPTS / "slow_rank.py")
    short = run([*launcher(), "--nproc-per-node", "2", "--process-group-timeout", "2", script, "--seconds", "8"],
                cwd=tmp_path, timeout=120)
    assert short.returncode != 0 and "through rank 1" not in short.output, short.output
    long = run([*launcher(), "--nproc-per-node", "2", "--process-group-timeout", "60", script, "--seconds", "4"],
               cwd=tmp_path, timeout=120).check()
    assert sorted(line.split(" ", 1)[1] for line in long.output.splitlines() if "through" in line) == ["through rank 0", "through rank 1"], long.output
