""".pre-commit-hooks.yaml works with real pre-commit: `pre-commit try-repo` installs this
checkout into its own environment (pip, no torch) and runs the lint hook in a fresh repo.

try-repo uses a commit of this checkout (HEAD, passed as --ref so other people's
uncommitted edits in a shared checkout do not leak in); CI runs on a fresh clone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("pre_commit", reason="pre-commit is not installed")
pytestmark = [
    pytest.mark.timeout(1200),
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
    pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs this checkout to be a git repository"),
]

HAZARD = (
    "import torch\n\n"
    "model = torch.nn.Linear(2, 2)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "loss = model(torch.ones(2)).sum()\n"
    "loss.backward()\n"
)
CLEAN = "import json\n\nprint(json.dumps({'ok': True}))\n"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), NO_COLOR="1", PRE_COMMIT_COLOR="never")
    return env


def _try_repo(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    repo = tmp_path / "user-repo"
    repo.mkdir()
    env = _env(tmp_path)
    subprocess.run(["git", "init", "-q", "."], cwd=repo, env=env, check=True, timeout=60)
    (repo / "train.py").write_text(source)
    subprocess.run(["git", "add", "train.py"], cwd=repo, env=env, check=True, timeout=60)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "accel-migrate-lint",
         "--all-files", "--ref", head],
        cwd=repo, env=env, capture_output=True, text=True, timeout=1100,
    )


def test_lint_hook_fails_on_a_hazard(tmp_path):
    proc = _try_repo(tmp_path, HAZARD)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "accel-migrate (lint)" in proc.stdout and "Failed" in proc.stdout
    assert "train.py:6:1: AM301 `loss.backward()` bypasses the Accelerator" in proc.stdout


def test_lint_hook_passes_on_a_clean_file(tmp_path):
    proc = _try_repo(tmp_path, CLEAN)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "accel-migrate (lint)" in proc.stdout and "Passed" in proc.stdout
