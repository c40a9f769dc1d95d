"""config.py: `[tool.accel-migrate]` discovery and parsing, command-line layering, globs;
and the same through the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from migrator.config import (
    Config,
    ConfigError,
    ConfigResolver,
    Overrides,
    Target,
    find_pyproject,
    glob_match,
    load_pyproject,
)

HAZARDS = (
    "import torch\n\n"
    "device = torch.device('cuda')\n"
    "model = torch.nn.Linear(2, 2).to(device)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "loss = model(torch.ones(2, device=device)).sum()\n"
    "loss.backward()\n"
)


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )


def write_pyproject(directory: Path, body: str) -> Path:
    path = directory / "pyproject.toml"
    path.write_text("[project]\nname = 'demo'\n\n" + body)
    return path


# --- discovery and parsing ---------------------------------------------------------


def test_find_pyproject_takes_the_nearest_with_our_table(tmp_path):
    write_pyproject(tmp_path, "[tool.accel-migrate]\nignore = ['AM104']\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text("[tool.black]\nline-length = 100\n")  # not ours: skipped
    deeper = sub / "deeper"
    deeper.mkdir()
    assert find_pyproject(str(deeper / "train.py")) == str(tmp_path / "pyproject.toml")
    write_pyproject(deeper, "[tool.accel-migrate]\n")
    assert find_pyproject(str(deeper / "train.py")) == str(deeper / "pyproject.toml")


def test_load_pyproject_reads_every_key(tmp_path):
    path = write_pyproject(tmp_path, """
[tool.accel-migrate]
select = ["AM1", "tensor-backward"]
ignore = ["AM104"]
target = "accelerate"
unsafe-fixes = true
exclude = ["legacy/"]

[tool.accel-migrate.per-file-ignores]
"tests/*" = ["AM1", "AM3"]
""")
    config = load_pyproject(str(path))
    assert config == Config(
        select=("AM1", "tensor-backward"),
        ignore=("AM104",),
        target=Target.ACCELERATE,
        unsafe_fixes=True,
        per_file_ignores=(("tests/*", ("AM1", "AM3")),),
        exclude=("legacy/",),
        root=str(tmp_path),
    )


@pytest.mark.parametrize(
    "body, reason",
    [
        ("selct = ['AM1']", "unknown key 'selct'"),
        ("select = 'AM1'", "select must be a list of strings"),
        ("ignore = [1]", "ignore must be a list of strings"),
        ("target = 'tpu'", "target must be one of ['runtime', 'accelerate'], not 'tpu'"),
        ("unsafe-fixes = 'yes'", "unsafe-fixes must be true or false"),
        ("per-file-ignores = ['x']", "per-file-ignores must be a table"),
    ],
)
def test_invalid_table_names_the_file(tmp_path, body, reason):
    path = write_pyproject(tmp_path, f"[tool.accel-migrate]\n{body}\n")
    with pytest.raises(ConfigError) as info:
        load_pyproject(str(path))
    assert reason in info.value.reason
    assert str(info.value).startswith(f"{path}:1:1: error: invalid configuration: ")


@pytest.mark.parametrize(
    "body, line",
    [("select = [\"AM1\"\n", 5), ("select = [\"AM1\" \"AM2\"]\ntarget = 'runtime'\n", 5)],
)
def test_invalid_toml_carries_its_position(tmp_path, body, line):
    path = write_pyproject(tmp_path, "[tool.accel-migrate]\n" + body)
    with pytest.raises(ConfigError) as info:
        load_pyproject(str(path))
    assert "not valid TOML" in info.value.reason
    assert info.value.line == line


# --- layering ----------------------------------------------------------------------


def test_overrides_select_replaces_select_and_ignore():
    base = Config(select=("AM1",), ignore=("AM104",), exclude=("a/",))
    merged = Overrides(select=("AM104",), ignore=("AM101",), exclude=("b/",)).apply(base)
    assert merged.select == ("AM104",)
    assert merged.ignore == ("AM101",)
    assert merged.exclude == ("a/", "b/")


def test_overrides_without_select_extend_ignore_and_keep_the_rest():
    base = Config(select=("AM1",), ignore=("AM104",), target=Target.ACCELERATE, unsafe_fixes=True)
    merged = Overrides(ignore=("AM101",), fix=False).apply(base)
    assert merged.select == ("AM1",)
    assert merged.ignore == ("AM104", "AM101")
    assert merged.target is Target.ACCELERATE
    assert merged.unsafe_fixes is True
    assert merged.fix is False


def test_overrides_target_and_unsafe_fixes_win():
    merged = Overrides(target=Target.RUNTIME, unsafe_fixes=False).apply(
        Config(target=Target.ACCELERATE, unsafe_fixes=True)
    )
    assert (merged.target, merged.unsafe_fixes) == (Target.RUNTIME, False)


# --- globs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, pattern, expected",
    [
        ("tests/test_a.py", "tests", True),
        ("src/tests/test_a.py", "tests", True),
        ("src/x_test.py", "*_test.py", True),
        ("src/x.py", "*_test.py", False),
        ("legacy/a/b.py", "legacy/", True),
        ("src/legacy/b.py", "legacy/", True),  # a trailing "/" does not anchor (gitignore)
        ("src/legacy/b.py", "legacy/*", False),  # an inner "/" anchors at the project root
        ("tests/unit/a.py", "tests/*", True),
        ("scripts/eval.py", "scripts/eval.py", True),
        ("scripts/eval.py", "./scripts/eval.py", True),
        ("scripts/train.py", "scripts/eval.py", False),
    ],
)
def test_glob_match(path, pattern, expected):
    assert glob_match(PurePosixPath(path), pattern) is expected


def test_for_file_adds_per_file_ignores(tmp_path):
    config = Config(ignore=("AM104",), per_file_ignores=(("tests/*", ("AM1",)),), root=str(tmp_path))
    assert config.for_file(str(tmp_path / "tests" / "a.py")).ignore == ("AM104", "AM1")
    assert config.for_file(str(tmp_path / "src" / "a.py")) is config


def test_resolver_caches_and_isolated_skips_pyprojects(tmp_path):
    write_pyproject(tmp_path, "[tool.accel-migrate]\nignore = ['AM104']\n")
    resolver = ConfigResolver(Overrides(ignore=("AM101",)))
    first = resolver.config_for(str(tmp_path / "a.py"))
    assert first.ignore == ("AM104", "AM101")
    assert resolver.config_for(str(tmp_path / "b.py")) is first
    isolated = ConfigResolver(Overrides(ignore=("AM101",)), isolated=True)
    assert isolated.config_for(str(tmp_path / "a.py")).ignore == ("AM101",)


def test_resolver_reports_an_invalid_pyproject_and_excluded_never_raises(tmp_path):
    write_pyproject(tmp_path, "[tool.accel-migrate]\nbogus = 1\n")
    resolver = ConfigResolver()
    with pytest.raises(ConfigError):
        resolver.config_for(str(tmp_path / "a.py"))
    assert resolver.excluded(str(tmp_path / "a.py")) is False


# --- through the CLI ---------------------------------------------------------------


def _codes(stdout: str) -> set[str]:
    return {line.split(": ")[1].split()[0] for line in stdout.splitlines() if ": AM" in line}


def test_cli_uses_the_project_ignore_and_flags_win(tmp_path):
    write_pyproject(tmp_path, "[tool.accel-migrate]\nignore = ['AM1']\n")
    (tmp_path / "train.py").write_text(HAZARDS)
    proc = run_cli("train.py", "--lint", cwd=tmp_path)
    assert proc.returncode == 1, proc
    assert _codes(proc.stdout) and not any(c.startswith("AM1") for c in _codes(proc.stdout))
    proc = run_cli("train.py", "--lint", "--select", "AM101", cwd=tmp_path)
    assert _codes(proc.stdout) == {"AM101"}, proc
    proc = run_cli("train.py", "--lint", "--isolated", cwd=tmp_path)
    assert "AM101" in _codes(proc.stdout)


def test_cli_per_file_ignores_and_exclude(tmp_path):
    write_pyproject(tmp_path, """
[tool.accel-migrate]
exclude = ["legacy"]

[tool.accel-migrate.per-file-ignores]
"scripts/*" = ["AM301"]
""")
    for rel in ("train.py", "scripts/train.py", "legacy/train.py"):
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text(HAZARDS)
    proc = run_cli(".", "--lint", cwd=tmp_path)
    assert proc.returncode == 1, proc
    assert "train.py:7:1: AM301" in proc.stdout
    assert "scripts/train.py:7:1: AM301" not in proc.stdout
    assert "scripts/train.py" in proc.stdout  # its other findings are still there
    assert "legacy" not in proc.stdout
    # exclude also applies to a file named on the command line (what pre-commit does)
    proc = run_cli("legacy/train.py", "--lint", cwd=tmp_path)
    assert proc.returncode == 0, proc
    assert proc.stdout == ""


def test_cli_target_from_the_project(tmp_path):
    write_pyproject(tmp_path, "[tool.accel-migrate]\ntarget = 'accelerate'\n")
    (tmp_path / "train.py").write_text(HAZARDS)
    proc = run_cli("train.py", "--diff", cwd=tmp_path)
    assert "+from accelerate import Accelerator" in proc.stdout, proc
    proc = run_cli("train.py", "--diff", "--target", "runtime", cwd=tmp_path)
    assert "+from runtime import Accelerator" in proc.stdout, proc


@pytest.mark.parametrize(
    "body, reason",
    [
        ("target = 'tpu'", "target must be one of"),
        ("select = ['AM999']", "select: 'AM999' matches no rule"),
        ('select = ["AM1"', "not valid TOML"),
    ],
)
def test_cli_invalid_config_is_one_error_line_naming_the_file(tmp_path, body, reason):
    write_pyproject(tmp_path, f"[tool.accel-migrate]\n{body}\n")
    (tmp_path / "a.py").write_text(HAZARDS)
    (tmp_path / "b.py").write_text(HAZARDS)
    proc = run_cli(".", "--lint", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, proc.stderr  # said once, not once per file
    assert "pyproject.toml:" in errors[0] and "invalid configuration" in errors[0]
    assert reason in errors[0]
