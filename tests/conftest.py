"""Test hygiene for the whole suite: a test must not leak environment variables, a process
group, or child processes.

Kept generic and cheap; torch is never imported here (migrator tests run without it), and
torch.distributed is only looked at when a test already imported torch.
"""

from __future__ import annotations

import os
import sys

import psutil
import pytest

# Set by pytest itself, or by libraries on a lazy first import (torch's inductor sets its
# cache dir the first time an optimizer steps): restored, but not a test's fault.
_SET_BY_TOOLS = {"PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "KMP_INIT_AT_FORK", "CUDA_MODULE_LOADING"}


@pytest.fixture(autouse=True)
def _hygiene():
    """Restore os.environ, destroy a leftover process group, kill leftover children; fail on any."""
    env_before = dict(os.environ)
    children_before = {child.pid for child in _children()}
    yield
    problems = [_restore_environment(env_before)]
    problems.append(_destroy_process_group())
    problems.append(_kill_new_children(children_before))
    problems = [p for p in problems if p]
    if problems:
        pytest.fail("test hygiene: " + "; ".join(problems), pytrace=False)


def _restore_environment(before: dict[str, str]) -> str:
    after = dict(os.environ)
    if after == before:
        return ""
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    for name in added:
        del os.environ[name]
    os.environ.update({name: before[name] for name in removed + changed})
    added, removed, changed = ([n for n in names if n not in _SET_BY_TOOLS] for names in (added, removed, changed))
    if not (added or removed or changed):
        return ""
    parts = [f"{label} {names}" for label, names in (("added", added), ("removed", removed), ("changed", changed)) if names]
    return "leaked environment variables (" + ", ".join(parts) + "); use monkeypatch.setenv"


def _destroy_process_group() -> str:
    if "torch" not in sys.modules:
        return ""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        return "left a torch.distributed process group initialised"
    return ""


# multiprocessing's fork server and its resource tracker: `python -c "from multiprocessing.forkserver import main; ..."`
_SESSION_HELPERS = "from multiprocessing."


def _children() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def _kill_new_children(before: set[int]) -> str:
    killed, names = [], []
    for child in _children():
        if child.pid in before:
            continue
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                continue  # exited, not yet waited for by its owner: nothing left running
            if any(_SESSION_HELPERS in part for part in child.cmdline()):
                continue  # the equivalence runs' fork server (tests/equivalence/forked.py) lives for the session
            names.append(f"{child.pid} ({' '.join(child.cmdline()[:3])})")
            child.kill()
            killed.append(child)
        except psutil.Error:
            continue
    psutil.wait_procs(killed, timeout=5)
    return f"left child processes running: {', '.join(names)}" if names else ""
