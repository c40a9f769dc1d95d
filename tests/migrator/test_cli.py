"""The `accel-migrate` command through a real subprocess: modes, exit statuses, options,
colour, start-up cost, and the bundled example the README's Quickstart runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train.py"

HAZARD = (
    "import torch\n\n"
    "device = torch.device('cuda')\n"
    "model = torch.nn.Linear(2, 2).to(device)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "loss = model(torch.ones(2)).sum()\n"
    "loss.backward()\n"
)
CLEAN = "import torch\n\nx = torch.ones(2)\nprint(x.sum())\n"


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args],
        cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True, timeout=120,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(HAZARD)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


# --- modes and exit statuses -------------------------------------------------------


def test_diff_prints_a_plain_diff_and_writes_nothing(project):
    proc = run_cli("train.py", "--diff", cwd=project)
    assert proc.returncode == 1, proc
    assert proc.stdout.startswith("--- a/train.py\n+++ b/train.py\n")
    assert "+accelerator.backward(loss)\n" in proc.stdout
    assert "\x1b[" not in proc.stdout + proc.stderr
    assert "would be migrated" in proc.stderr
    assert (project / "train.py").read_text() == HAZARD


def test_default_mode_lists_findings_and_says_what_to_run(project):
    proc = run_cli("train.py", cwd=project)
    assert proc.returncode == 1, proc
    assert "train.py:7:1: AM301 `loss.backward()` bypasses the Accelerator [*]" in proc.stdout.splitlines()
    assert "--write" in proc.stderr and "--diff" in proc.stderr
    assert (project / "train.py").read_text() == HAZARD


def test_lint_exit_statuses(project):
    hazard = run_cli("train.py", "--lint", cwd=project)
    assert hazard.returncode == 1
    assert "train.py:7:1: AM301" in hazard.stdout
    clean = run_cli("clean.py", "--lint", cwd=project)
    assert clean.returncode == 0, clean
    assert clean.stdout == ""


def test_check_then_write_then_check(project):
    check = run_cli(".", "--check", cwd=project)
    assert check.returncode == 1
    assert "Would rewrite train.py" in check.stdout
    assert "clean.py" not in check.stdout
    assert (project / "train.py").read_text() == HAZARD
    write = run_cli(".", "--write", cwd=project)
    assert write.returncode == 0, write
    assert "Rewrote train.py" in write.stderr
    assert "accelerator.backward(loss)" in (project / "train.py").read_text()
    again = run_cli(".", "--check", cwd=project)
    assert again.returncode == 0, again  # idempotent: nothing left to do
    assert "Nothing to migrate." in again.stderr


def test_output_writes_elsewhere(project):
    proc = run_cli("train.py", "-o", "train_ddp.py", cwd=project)
    assert proc.returncode == 0, proc
    assert (project / "train.py").read_text() == HAZARD
    assert "accelerator.backward(loss)" in (project / "train_ddp.py").read_text()


@pytest.mark.parametrize(
    "args, message",
    [
        (["train.py", "clean.py", "-o", "out.py"], "--output takes exactly one input file"),
        ([".", "-o", "out.py"], "--output takes exactly one input file"),
        (["train.py", "--diff", "--write"], "--diff and --write cannot be combined"),
        (["train.py", "--lint", "-o", "out.py"], "--output writes a file; --lint writes nothing"),
        (["train.py", "--select", "AM999"], "'AM999' matches no rule"),
        (["train.py", "--ignore", "no-such-rule"], "'no-such-rule' matches no rule"),
        ([], "no PATH given"),
        (["--explain", "AM999"], "no rule 'AM999'"),
    ],
)
def test_usage_errors_exit_2(project, args, message):
    proc = run_cli(*args, cwd=project)
    assert proc.returncode == 2, proc
    assert f"accel-migrate: error: {message}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_option_exits_2(project):
    proc = run_cli("train.py", "--frobnicate", cwd=project)
    assert proc.returncode == 2
    assert "No such option" in proc.stderr


# --- rule selection and target -----------------------------------------------------


def _codes(stdout: str) -> set[str]:
    return {line.split(": ")[1].split()[0] for line in stdout.splitlines() if ": AM" in line}


def test_select_and_ignore_by_code_prefix_and_name(project):
    # AM301 alone would use an Accelerator nothing creates: the lint says, as --write would, that
    # such a migration is left as written (AM950), and promises no fix
    only = run_cli("train.py", "--lint", "--select", "AM301", cwd=project)
    assert _codes(only.stdout) == {"AM301", "AM950"} and "[*]" not in only.stdout + only.stderr
    selected = _codes(run_cli("train.py", "--lint", "--select", "AM1,tensor-backward", cwd=project).stdout)
    assert "AM301" in selected and all(c.startswith(("AM1", "AM95")) or c == "AM301" for c in selected)
    ignored = _codes(run_cli("train.py", "--lint", "--ignore", "AM1", cwd=project).stdout)
    assert ignored and not any(c.startswith("AM1") for c in ignored)


def test_target_accelerate(project):
    proc = run_cli("train.py", "--diff", "--target", "accelerate", cwd=project)
    assert "+from accelerate import Accelerator\n" in proc.stdout, proc


# --- output formats and statistics end to end --------------------------------------


def test_output_format_json_is_the_whole_stdout(project):
    import json

    proc = run_cli(".", "--lint", "--output-format", "json", cwd=project)
    data = json.loads(proc.stdout)
    assert sorted(f["path"] for f in data) == ["clean.py", "train.py"]


def test_output_format_github(project):
    proc = run_cli("train.py", "--lint", "--output-format", "github", cwd=project)
    assert proc.returncode == 1
    assert all(line.startswith("::warning file=train.py,") for line in proc.stdout.splitlines())


def test_statistics(project):
    proc = run_cli("train.py", "--lint", "--statistics", cwd=project)
    assert "train.py:" not in proc.stdout
    assert any(line.split()[:2] == ["1", "AM301"] for line in proc.stdout.splitlines()), proc.stdout


# --- colour ------------------------------------------------------------------------


def test_force_color_and_no_color(project):
    forced = run_cli("train.py", "--diff", cwd=project, env={"FORCE_COLOR": "1"})
    assert "\x1b[" in forced.stdout
    both = run_cli("train.py", "--diff", cwd=project, env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert "\x1b[" not in both.stdout


# --- documentation commands --------------------------------------------------------


def test_version_help_and_list_rules(project):
    from migrator import __version__, registry

    assert run_cli("--version", cwd=project).stdout == f"accel-migrate {__version__}\n"
    help_text = run_cli("--help", cwd=project).stdout
    for word in ("--diff", "--write", "--check", "--lint", "--explain", "Examples:", "accel-migrate train.py --diff"):
        assert word in help_text
    table = run_cli("--list-rules", cwd=project)
    assert table.returncode == 0
    for rule in registry.all_rules():
        assert rule.code in table.stdout


# --- start-up: never torch, no LibCST for --help -----------------------------------

_PROBE = """
import sys
from migrator.cli import main
sys.argv = ["accel-migrate", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print("\\nLOADED", "torch" in sys.modules, "libcst" in sys.modules, "rich" in sys.modules, file=sys.stderr)
"""


def _loaded(*args: str, cwd: Path) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    return proc.stderr.strip().splitlines()[-1].split()[1:]


def test_help_imports_neither_torch_nor_libcst_nor_rich(project):
    assert _loaded("--help", cwd=project) == ["False", "False", "False"]


def test_a_lint_run_never_imports_torch_or_rich(project):
    torch, libcst, rich = _loaded("train.py", "--lint", cwd=project)
    assert (torch, libcst, rich) == ("False", "True", "False")


# --- the bundled example (README Quickstart) ---------------------------------------


def test_quickstart_command_on_the_bundled_example():
    proc = run_cli("examples/train.py", "--diff", cwd=ROOT)
    assert proc.returncode == 1, proc  # 1: there is something to migrate
    assert proc.stdout.startswith("--- a/examples/train.py\n")
    for line in ("+from runtime import Accelerator", "+            accelerator.backward(loss)",
                 "-            loss.backward()"):
        assert line in proc.stdout.splitlines()
    assert "error" not in proc.stderr


def test_bundled_example_migrates_to_code_that_compiles(tmp_path):
    proc = run_cli(str(EXAMPLE), "-o", str(tmp_path / "train.py"), cwd=tmp_path)
    assert proc.returncode == 0, proc  # nothing left for a human
    compile((tmp_path / "train.py").read_text(), "train.py", "exec")


def test_bundled_example_trains_on_cpu():
    pytest.importorskip("torch")
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--epochs", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert proc.returncode == 0, proc.stderr
    losses = [float(line.rsplit(" ", 1)[1]) for line in proc.stdout.splitlines() if "mean loss" in line]
    assert len(losses) == 2 and losses[1] < losses[0]


# --- scale: progress bar, --report checked up front, Ctrl-C --------------------------


def _many(tmp_path: Path, n: int = 24) -> Path:
    for i in range(n):  # no framework in them: quick to process, enough for a bar
        (tmp_path / f"util_{i:02d}.py").write_text(f"VALUE_{i} = {i}\n")
    return tmp_path


def test_no_progress_bar_when_piped(tmp_path):
    proc = run_cli(".", "--check", "-j", "1", cwd=_many(tmp_path))
    assert proc.returncode == 0, proc
    assert proc.stdout == "" and proc.stderr == "Nothing to migrate.\n"


def test_progress_bar_on_a_terminal(tmp_path):
    """stderr on a pseudo-terminal: the bar is drawn there, then erased; stdout is piped."""
    import pty

    _many(tmp_path)
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    proc = subprocess.Popen([sys.executable, "-m", "migrator", ".", "--check", "-j", "1"], cwd=tmp_path,
                            env={**env, "TERM": "xterm"}, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert proc.wait(timeout=120) == 0
    assert proc.stdout.read() == b""
    proc.stdout.close()
    assert b"Migrating" in seen and b"24/24" in seen
    after_bar = seen.rsplit(b"24/24", 1)[1]
    assert b"\x1b[2K" in after_bar and b"Nothing to migrate." in after_bar  # erased, then the summary


def test_report_path_is_checked_before_anything_is_written(project):
    proc = run_cli("train.py", "--write", "--report", "no/such/dir/report.md", cwd=project)
    assert proc.returncode == 2, proc
    assert proc.stderr == "accel-migrate: error: cannot write the report to no/such/dir/report.md: no such directory\n"
    assert proc.stdout == ""
    assert (project / "train.py").read_text() == HAZARD
    (project / "report.md").mkdir()
    proc = run_cli("train.py", "--report", "report.md", cwd=project)
    assert proc.stderr == "accel-migrate: error: cannot write the report to report.md: is a directory\n"


def test_ctrl_c_is_one_line_and_exit_130(project, monkeypatch):
    """In-process: an interrupt during the run (here: while migrating the first file)."""
    from typer.testing import CliRunner

    from migrator import api, cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "migrate_source", interrupted)
    monkeypatch.chdir(project)
    outcome = CliRunner().invoke(cli.app, [".", "--write", "-j", "1"])
    assert outcome.exit_code == 130
    assert outcome.stderr.startswith("accel-migrate: interrupted")
    assert "Traceback" not in outcome.output
    assert (project / "train.py").read_text() == HAZARD


def test_python_s_remarks_on_the_user_s_code_are_not_printed(tmp_path: Path) -> None:
    """`if d.__name__ is 'adjust_hue':` in the SSD tutorial's utils.py made Python print a
    SyntaxWarning, in the middle of our report, each time the migrated file was compiled
    to check it; under `-W error` the check failed and the migration was refused."""
    (tmp_path / "train.py").write_text(HAZARD + "name = 'hue'\nprint(name is 'adjust_hue')\n")
    done = run_cli("--diff", "--no-cache", "train.py", cwd=tmp_path)
    assert "SyntaxWarning" not in done.stdout + done.stderr
    assert "accelerator.backward(loss)" in done.stdout, done.stdout + done.stderr
    strict = run_cli("--diff", "--no-cache", "train.py", cwd=tmp_path, env={"PYTHONWARNINGS": "error::SyntaxWarning"})
    assert strict.stdout == done.stdout, strict.stdout + strict.stderr
