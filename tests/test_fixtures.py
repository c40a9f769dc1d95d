"""Walk fixtures/*/input.py: snapshot the migration and its findings, and hold the
DESIGN.md invariants on every case (compiles, idempotent, untouched lines unchanged)."""

from __future__ import annotations

import ast
import difflib
from pathlib import Path

import pytest

from migrator.api import migrate_source
from migrator.findings import FileStatus
from tests.fixture_cases import case_config, cases, render_findings

CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fixture(case: Path, snapshot) -> None:
    snapshot.snapshot_dir = case
    config = case_config(case)
    source = (case / "input.py").read_bytes()
    result = migrate_source(source, "input.py", config)
    if case.name.startswith("err-"):
        assert result.status is FileStatus.FAILED
        snapshot.assert_match(f"{result.error}\n", "errors.txt")
        return
    assert result.status is not FileStatus.FAILED, result.error
    snapshot.assert_match(result.after, "expected.py")
    snapshot.assert_match(render_findings(result.findings), "findings.txt")
    _assert_invariants(result, config)


def _assert_invariants(result, config) -> None:
    after = result.after
    compile(after, "expected.py", "exec")
    again = migrate_source(after, "expected.py", config)
    assert again.after == after, "a second run changed the output (not idempotent)"
    # a fix this config would apply must be gone; an unsafe one without `unsafe` stays offered
    leftovers = [f for f in again.findings if f.fixable and (config.unsafe_fixes or not f.unsafe_fix)]
    assert not leftovers, f"fixable findings remain after migration: {leftovers}"
    _assert_only_fixed_lines_changed(result)


def _guarded_import_lines(source: str) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Try) and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in node.body):
            out |= set(range(node.lineno, node.end_lineno + 1))
    return out


def _assert_only_fixed_lines_changed(result) -> None:
    """Every original line that changed or went away is one an accepted edit replaced
    (or an import line, which LibCST's import passes manage, with the `try:` that guards
    nothing but imports and its `except ImportError:`)."""
    before = result.before.splitlines()
    after = result.after.splitlines()
    touched = result.touched_lines | _guarded_import_lines(result.before)
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            for i in range(i1, i2):
                line = before[i].strip()
                if line.startswith(("import ", "from ")) or not line:
                    continue
                assert i + 1 in touched, f"line {i + 1} changed but no fixed finding covers it: {before[i]!r}"
