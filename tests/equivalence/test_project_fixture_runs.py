"""Every runnable project fixture runs as migrated (its expected/ snapshot is what the
tool writes): on 1 process it prints the numbers the original prints, and on 2 processes
under accel-launch it finishes on both ranks."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.equivalence import runner

pytestmark = pytest.mark.timeout(900)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
# fixture → its entry point (a dotted name: a module of a package, run through a small script)
RUNS = {
    "project-setup-and-engine": "train.py",
    "project-trainer-class-in-another-module": "main.py",
    "project-setup-class-in-another-module": "main.py",
    "project-package-relative-imports": "trainer.cli",
    "project-engine-under-an-alias": "main.py",
    "project-loaders-from-a-helper-module": "train.py",
    "project-checkpoint-helpers": "train.py",
    "project-distribution-helpers": "main.py",
    "project-early-stopping-helper-class": "train.py",
    "project-trainer-and-evaluator-classes": "main.py",
    "project-solver-class-builds-its-models": "main.py",
}
_NUMBER = re.compile(r"-?\d+\.\d+(?:e-?\d+)?|-?\d+")
_PROGRESS = re.compile(r"\|.*\||it/s|s/it|^W\d{4}")
_LAUNCHER = re.compile(r"^\[(?:rank|default)\d+\]:\s*")


def _entry(folder: Path, entry: str) -> Path:
    if entry.endswith(".py"):
        return folder / entry
    script = folder / "_run_entry.py"
    script.write_text(f"from {entry} import main\n\nmain()\n")
    return script


def _numbers(output: str) -> list[list[float]]:
    """The numbers of each line the program prints (not progress bars, which print rates,
    nor lines without numbers, such as the helpers' "Not using distributed mode")."""
    lines = [_LAUNCHER.sub("", line) for line in re.split(r"[\r\n]+", output)]
    numbers = [[float(n) for n in _NUMBER.findall(line)] for line in lines if not _PROGRESS.search(line)]
    return [n for n in numbers if n]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_migrated_project_fixture_runs_like_the_original(name: str, tmp_path: Path) -> None:
    case = FIXTURES / name
    original = shutil.copytree(case / "input", tmp_path / "original")
    migrated = shutil.copytree(case / "expected", tmp_path / "migrated")
    before = _ok(runner.run(runner.python_cmd(_entry(original, RUNS[name]), []), original, 180))
    after = _ok(runner.run(runner.python_cmd(_entry(migrated, RUNS[name]), []), migrated, 180))
    expected, got = _numbers(before.output), _numbers(after.output)
    assert len(got) == len(expected), after.output
    for want, have in zip(expected, got):
        assert have == pytest.approx(want, abs=1e-5), (before.output, after.output)
    run = _ok(runner.run(runner.accel_launch_cmd(_entry(migrated, RUNS[name]), [], 2), migrated, 300, env=runner.TEE_ENV))
    assert "Traceback" not in run.output, run.output


def _ok(run):
    assert run.returncode == 0, f"exit status {run.returncode}: {' '.join(run.command)}\n{run.output[-5000:]}"
    return run
