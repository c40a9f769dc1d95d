"""`accel-migrate nb.ipynb --diff | --write | --check | --lint` through a real subprocess,
directories that hold notebooks beside scripts, and the pre-commit hook on a notebook."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.notebook.helpers import code_sources, make_notebook

ROOT = Path(__file__).resolve().parents[2]
CELLS = [
    "!pip install -q torch\n%matplotlib inline",
    "import torch",
    "model = torch.nn.Linear(2, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
    "for x in [torch.ones(2)]:\n    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()",
]
NOTEBOOK = make_notebook(CELLS, markdown_first=False)
SCRIPT = "import torch\n\nmodel = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel(torch.ones(2)).sum().backward()\n"


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    return subprocess.run([sys.executable, "-m", "migrator", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "nb.ipynb").write_text(NOTEBOOK, encoding="utf-8")
    return tmp_path


def test_diff_shows_cells_not_json(project):
    proc = run_cli("nb.ipynb", "--diff", cwd=project)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("--- a/nb.ipynb:cell 2\n+++ b/nb.ipynb:cell 2\n@@ ")
    assert "+from runtime import Accelerator\n" in proc.stdout
    assert "--- a/nb.ipynb:cell 4\n+++ b/nb.ipynb:cell 4\n" in proc.stdout
    assert "-    loss.backward()\n+    accelerator.backward(loss)\n" in proc.stdout
    assert '"source"' not in proc.stdout and "cell 1\n" not in proc.stdout, "unchanged cells are not shown"
    assert "nb.ipynb:cell 4:1:1: AM930 " in proc.stdout
    assert (project / "nb.ipynb").read_text(encoding="utf-8") == NOTEBOOK


def test_write_migrates_in_place_and_keeps_a_valid_notebook(project):
    proc = run_cli("nb.ipynb", "--write", cwd=project)
    assert proc.returncode == 1, proc.stderr  # AM930 is left for a human
    assert "Rewrote nb.ipynb" in proc.stderr
    text = (project / "nb.ipynb").read_text(encoding="utf-8")
    nbformat.validate(nbformat.reads(text, as_version=4))
    sources = code_sources(text)
    assert sources[0] == CELLS[0]
    assert "accelerator.backward(loss)" in sources[3]
    old, new = json.loads(NOTEBOOK), json.loads(text)
    assert [{k: v for k, v in c.items() if k != "source"} for c in old["cells"]] == \
        [{k: v for k, v in c.items() if k != "source"} for c in new["cells"]]
    check = run_cli("nb.ipynb", "--check", cwd=project)
    assert "Nothing to migrate. 1 finding left for a human." in check.stderr, check.stderr
    assert "Would rewrite" not in check.stdout


def test_check_and_lint(project):
    check = run_cli("nb.ipynb", "--check", cwd=project)
    assert check.returncode == 1 and "Would rewrite nb.ipynb" in check.stdout
    lint = run_cli("nb.ipynb", "--lint", cwd=project)
    assert lint.returncode == 1
    assert "nb.ipynb:cell 4:3:5: AM301 `loss.backward()` bypasses the Accelerator [*]" in lint.stdout.splitlines()
    assert (project / "nb.ipynb").read_text(encoding="utf-8") == NOTEBOOK


def test_json_output_carries_the_cell(project):
    proc = run_cli("nb.ipynb", "--lint", "--output-format", "json", cwd=project)
    findings = json.loads(proc.stdout)[0]["findings"]
    backward = next(f for f in findings if f["code"] == "AM301")
    assert (backward["cell"], backward["line"], backward["col"]) == (4, 3, 5)


def test_a_directory_run_picks_up_notebooks_beside_scripts(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "nb.ipynb").write_text(NOTEBOOK, encoding="utf-8")
    checkpoints = tmp_path / ".ipynb_checkpoints"
    checkpoints.mkdir()
    (checkpoints / "nb-checkpoint.ipynb").write_text(NOTEBOOK, encoding="utf-8")
    proc = run_cli(".", "--lint", cwd=tmp_path)
    paths = {line.split(":", 1)[0] for line in proc.stdout.splitlines()}
    assert paths == {"train.py", "nb.ipynb"}, proc.stdout


def test_a_broken_notebook_is_an_error_and_the_others_still_go_through(tmp_path):
    (tmp_path / "bad.ipynb").write_text('{"cells": [', encoding="utf-8")
    (tmp_path / "nb.ipynb").write_text(NOTEBOOK, encoding="utf-8")
    proc = run_cli(".", "--lint", cwd=tmp_path)
    assert proc.returncode == 2
    assert "bad.ipynb:1:12: error: not a Jupyter notebook: invalid JSON" in proc.stderr
    assert "nb.ipynb:cell 4:3:5: AM301" in proc.stdout


def test_the_pre_commit_hooks_take_notebooks():
    import yaml
    from identify.identify import tags_from_path

    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert all("jupyter" in hook.get("types_or", []) for hook in hooks)
    assert "jupyter" in tags_from_path(str(ROOT / "fixtures" / "nb-tutorial" / "input.ipynb"))


@pytest.mark.timeout(1200)
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and this checkout")
def test_the_lint_hook_fails_on_a_notebook(tmp_path):
    """Real pre-commit (try-repo on this checkout's HEAD, as tests/migrator/test_precommit.py)."""
    pytest.importorskip("pre_commit")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(PRE_COMMIT_HOME=str(tmp_path / "home"), NO_COLOR="1", PRE_COMMIT_COLOR="never")
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "."], cwd=repo, env=env, check=True, timeout=60)
    (repo / "nb.ipynb").write_text(NOTEBOOK, encoding="utf-8")
    subprocess.run(["git", "add", "nb.ipynb"], cwd=repo, env=env, check=True, timeout=60)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "accel-migrate-lint", "--all-files", "--ref", head],
        cwd=repo, env=env, capture_output=True, text=True, timeout=1100,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "nb.ipynb:cell 4:3:5: AM301 `loss.backward()` bypasses the Accelerator" in proc.stdout
