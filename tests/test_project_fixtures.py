"""Walk fixtures/*/input/ (a folder: a project of several files migrated in one run,
migrator/project/): snapshot every file's migration under expected/ and the findings,
and hold the invariants: everything compiles, the stub of the callers never shows, and a
second run over what --write leaves changes nothing, finds nothing fixable and reports
what the first left for a human, nor does
each of its files run alone (what the pre-commit hook sees of a changed file)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from migrator.api import migrate_paths
from migrator.findings import FileStatus, is_refusal
from migrator.registry import all_rules
from tests.fixture_cases import FIXTURES, case_config, render_findings

CASES = sorted(p.parent for p in FIXTURES.glob("*/input") if p.is_dir())
_VERIFIER_NOTES = {rule.code for rule in all_rules() if rule.reported_by_verifier}


def _run(folder: Path, config, **kwargs) -> dict[str, object]:
    return {Path(r.path).relative_to(folder).as_posix(): r for r in migrate_paths([str(folder)], config, **kwargs)}


def _tree(files: dict[str, str]) -> dict:
    """{"pkg/a.py": text} → {"pkg": {"a.py": text}}, the shape assert_match_dir takes."""
    tree: dict = {}
    for rel, text in files.items():
        *folders, name = rel.split("/")
        node = tree
        for folder in folders:
            node = node.setdefault(folder, {})
        node[name] = text
    return tree


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_project_fixture(case: Path, snapshot, tmp_path) -> None:
    snapshot.snapshot_dir = case
    config = case_config(case)
    results = _run(case / "input", config)
    for rel, result in results.items():
        assert result.status is not FileStatus.FAILED, (rel, result.error)
        compile(result.after, rel, "exec")
        assert "_accel_migrate_callers" not in result.after
    snapshot.assert_match_dir(_tree({rel: r.after for rel, r in results.items()}), "expected")
    findings = [f for r in results.values() for f in r.findings]
    rendered = "".join(
        f"{rel}:{line}" for rel, r in results.items() for line in render_findings(r.findings).splitlines(True)
    )
    snapshot.assert_match(rendered, "findings.txt")
    assert findings or any(r.changed for r in results.values())
    copy = tmp_path / "project"
    shutil.copytree(case / "input", copy)
    list(migrate_paths([str(copy)], config, write=True))
    again = _run(copy, config)
    for rel, result in again.items():
        assert result.after == result.before, f"{rel}: a second run changed it"
        assert not [f for f in result.findings if f.fixable], f"{rel}: fixable findings after --write"
        # the same run decided again: what the first run left for a human is still said
        # (the verifier's notes on the migration it wrote are not: nothing is written; a file
        # it left as written is the same file, refused for the same reasons)
        first = results[rel]
        left = sorted(f.code for f in first.findings if not f.fixed and (f.code not in _VERIFIER_NOTES or not first.changed))
        assert sorted(f.code for f in result.findings) == left, f"{rel}: the second run's findings differ"
    for rel in again:
        alone = migrate_paths([str(copy / rel)], config)
        for result in alone:
            assert result.after == result.before, f"{rel} alone: a run of the migrated file changed it"
            refusals = [f.code for f in result.findings if is_refusal(f.code)]
            assert not refusals or not results[rel].changed, f"{rel} alone: {refusals} on the migrated file"
