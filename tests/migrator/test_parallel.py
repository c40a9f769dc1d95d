"""migrator/parallel.py on plain functions, then `-j 2` against `-j 1` through the real
command on a directory of fixture inputs: the same bytes out, the same exit status."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from migrator import parallel
from migrator.api import migrate_paths
from migrator.config import Config
from migrator.findings import FileStatus

from .test_cli import HAZARD

ROOT = Path(__file__).resolve().parents[2]


def _square(n: int) -> int:
    return n * n


def _raise_on_3(n: int) -> int:
    if n == 3:
        raise ValueError("three")
    return n


def _die_on_3(n: int) -> int:
    if n == 3:
        os._exit(7)  # what a crash in native code looks like from outside
    return n


def _slow(n: int) -> int:
    time.sleep(0.2)
    return n


def _crashed(item: int, crash: parallel.Crash) -> str:
    return f"crash {item}: {crash.summary}"


@pytest.mark.parametrize("jobs", [1, 2])
def test_results_come_in_the_items_order(jobs):
    items = list(range(40))
    assert list(parallel.map_ordered(_square, items, jobs, _crashed)) == [n * n for n in items]


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_item_that_raises_is_reported_and_the_rest_go_through(jobs):
    out = list(parallel.map_ordered(_raise_on_3, list(range(8)), jobs, _crashed))
    assert out[:3] == [0, 1, 2] and out[4:] == [4, 5, 6, 7]
    assert out[3].startswith("crash 3: ValueError: three at test_parallel.py:")


def test_a_worker_that_dies_is_that_items_failure_only():
    out = list(parallel.map_ordered(_die_on_3, list(range(8)), 2, _crashed))
    assert out[:3] == [0, 1, 2] and out[4:] == [4, 5, 6, 7]
    assert out[3].startswith("crash 3: the worker process died")


def test_ctrl_c_stops_the_workers_at_once():
    results = parallel.map_ordered(_slow, list(range(40)), 2, _crashed)
    assert next(results) == 0
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        results.throw(KeyboardInterrupt)
    assert time.monotonic() - start < 5  # not the ~4 s the remaining items would take
    # the suite's hygiene fixture fails the test if a worker process is left behind


def test_file_results_cross_process_boundaries(tmp_path):
    """Workers send FileResults back by pickle: every field must survive it."""
    import pickle

    from migrator.api import migrate_source

    result = migrate_source(HAZARD, "train.py", Config())
    assert result.status is FileStatus.CHANGED and result.findings
    assert pickle.loads(pickle.dumps(result)) == result


def test_api_jobs_2_equals_jobs_1_and_a_crash_names_its_file(tmp_path, monkeypatch):
    from migrator import api

    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(HAZARD)
    real = api.migrate_source

    def crash_on_b(source, path, config):
        if path.endswith("b.py"):
            raise RuntimeError("boom")  # past migrate_source's own net: the worker's guard catches it
        return real(source, path, config)

    monkeypatch.setattr(api, "migrate_source", crash_on_b)  # workers fork after this
    one = list(migrate_paths([str(tmp_path)], Config(), jobs=1))
    two = list(migrate_paths([str(tmp_path)], Config(), jobs=2))
    assert one == two
    assert [r.status for r in two] == [FileStatus.CHANGED, FileStatus.FAILED, FileStatus.CHANGED]
    error = two[1].error
    assert error.path.endswith("b.py") and error.code == "E999"
    assert error.message.startswith("internal error (RuntimeError: boom at test_parallel.py:")
    assert error.message.endswith("please report this bug")


def _fixture_tree(tmp_path: Path) -> Path:
    """Every third fixture case's input (scripts, notebooks, a syntax error) as one tree."""
    tree = tmp_path / "tree"
    tree.mkdir()
    cases = sorted(p for p in (ROOT / "fixtures").iterdir() if p.is_dir())
    chosen = cases[::3] + [c for c in cases if c.name.startswith(("err-", "nb-"))][:2]
    for case in dict.fromkeys(chosen):
        for source in case.glob("input.*"):
            shutil.copy(source, tree / f"{case.name}{source.suffix}")
    return tree


def test_jobs_2_output_is_byte_identical_to_jobs_1(tmp_path, monkeypatch):
    """The whole command, in-process: other engineers' edits to the rules while a test runs
    would make two subprocesses disagree; forked workers run the code this process loaded."""
    from typer.testing import CliRunner

    from migrator import cli

    tree = _fixture_tree(tmp_path)
    before = {p.name: p.read_bytes() for p in tree.iterdir()}
    monkeypatch.chdir(tmp_path)
    one = CliRunner().invoke(cli.app, ["tree", "--diff", "-j", "1", "--no-cache"])
    two = CliRunner().invoke(cli.app, ["tree", "--diff", "-j", "2", "--no-cache"])
    assert one.exit_code == two.exit_code == 2, one.output  # the err- case fails; the rest still go through
    assert (one.stdout, one.stderr) == (two.stdout, two.stderr)
    assert one.stdout.count("+++ b/") >= 5 and "cannot parse" in one.stderr
    assert "Traceback" not in one.output
    assert not (tmp_path / ".accel-migrate-cache").exists()
    assert {p.name: p.read_bytes() for p in tree.iterdir()} == before  # --diff writes nothing
