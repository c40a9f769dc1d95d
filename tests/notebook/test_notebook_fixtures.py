"""Walk fixtures/nb-*/input.ipynb: snapshot the migrated notebook and its findings, and hold
the notebook invariants on every case (valid nbformat, idempotent, only code cells'
sources change, every IPython line kept, an unchanged notebook kept byte for byte)."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from migrator.findings import FileStatus, Finding
from migrator.magics import mask_lines
from migrator.notebook import Notebook, migrate_notebook
from tests.fixture_cases import case_config
from tests.notebook.helpers import NB_CASES


def render_findings(findings: tuple[Finding, ...]) -> str:
    """One line per finding, "cell N:line:col CODE message" + " (fixed)" or " [*]"."""
    lines = []
    for f in sorted(findings, key=lambda f: (not f.fixed, f.cell or 0, f.start, f.code, f.message)):
        mark = " (fixed)" if f.fixed else (" [*]" if f.fixable else "")
        lines.append(f"{f.place} {f.code} {f.message}{mark}")
    return "\n".join(lines) + ("\n" if lines else "")


@pytest.mark.parametrize("case", NB_CASES, ids=[c.name for c in NB_CASES])
def test_notebook_fixture(case: Path, snapshot) -> None:
    snapshot.snapshot_dir = case
    config = case_config(case)
    data = (case / "input.ipynb").read_bytes()
    result = migrate_notebook(data, "input.ipynb", config)
    assert result.status is not FileStatus.FAILED, result.error
    snapshot.assert_match(result.after.encode(result.encoding), "expected.ipynb")
    snapshot.assert_match(render_findings(result.findings), "findings.txt")
    _assert_invariants(data, result, config)


def _assert_invariants(data: bytes, result, config) -> None:
    nbformat.validate(nbformat.reads(result.after, as_version=4))
    if not result.changed:
        assert result.after.encode(result.encoding) == data, "an unchanged notebook is kept byte for byte"
    again = migrate_notebook(result.after.encode(result.encoding), "input.ipynb", config)
    assert again.status is FileStatus.UNCHANGED, "a second run changed the notebook (not idempotent)"
    assert not [f for f in again.findings if f.fixable], "fixable findings remain after migration"
    before, after = json.loads(data), json.loads(result.after)
    for old, new in zip(before["cells"], after["cells"], strict=True):
        if old["cell_type"] != "code":
            assert old == new, "only code cells change"
        assert {k: v for k, v in old.items() if k != "source"} == {k: v for k, v in new.items() if k != "source"}
    _assert_ipython_lines_kept(data, result.after)


def _assert_ipython_lines_kept(before: bytes, after: str) -> None:
    """Every masked line comes back, in the same cell, in the same order."""
    old, new = Notebook.parse(before), Notebook.parse(after)
    for a, b in zip(old.cells, new.cells, strict=True):
        old_magics = [m for kind, m, _, _ in mask_lines(a.text) if kind == "magic"]
        new_magics = [m for kind, m, _, _ in mask_lines(b.text) if kind == "magic"]
        assert old_magics == new_magics, f"cell {a.number}"


def test_every_fixture_has_its_snapshots():
    assert len(NB_CASES) >= 4
    for case in NB_CASES:
        assert (case / "expected.ipynb").exists() and (case / "findings.txt").exists(), case.name
