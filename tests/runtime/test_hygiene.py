"""tests/conftest.py: the suite-wide hygiene fixture fails a test that leaks, and cleans up after it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

LEAKY_TESTS = '''
import os, subprocess, sys

def test_leaks_an_environment_variable():
    os.environ["ACCEL_HYGIENE_LEAK"] = "1"

def test_leaks_a_child_process():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

def test_leaks_a_process_group(tmp_path):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)

def test_clean(monkeypatch):
    monkeypatch.setenv("ACCEL_HYGIENE_FINE", "1")
    assert "ACCEL_HYGIENE_LEAK" not in os.environ, "the previous test's variable was not removed"
'''


def test_leaks_fail_the_test_that_made_them(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "test_leaky.py").write_text(LEAKY_TESTS)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", str(tmp_path)]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    out = done.stdout
    assert "4 passed, 3 errors" in out, out[-3000:]
    assert "leaked environment variables (added ['ACCEL_HYGIENE_LEAK'])" in out
    assert "left child processes running" in out and "time.sleep(60)" in out
    assert "left a torch.distributed process group initialised" in out
