"""render/: the diff, text, json, github and sarif formats, on real migration results."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from migrator import registry
from migrator.api import migrate_source
from migrator.config import Config
from migrator.findings import FileResult, FileStatus, Finding, Position, Severity
from migrator.render import github, sarif
from migrator.render import json as json_format
from migrator.render.diff import unified_diff
from migrator.render.report import Mode, RunReport
from migrator.render.text import Terminal, render, summary_line

DATA = Path(__file__).resolve().parent.parent / "data"

HAZARD = (
    "import torch\n\n"
    "model = torch.nn.Linear(2, 2)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "loss = model(torch.ones(2)).sum()\n"
    "loss.backward()\n"
)


def migrated(text: str = HAZARD, path: str = "train.py", fix: bool = True) -> FileResult:
    return migrate_source(text, path, Config(fix=fix))


def failed(path: str = "bad.py") -> FileResult:
    error = Finding(path, Position(2, 7), Position(2, 7), "E001", "e001", "cannot parse: invalid syntax",
                    severity=Severity.ERROR)
    return FileResult(path, FileStatus.FAILED, error=error)


def text_output(report: RunReport, **kwargs) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    render(report, Terminal(out, color=False), Terminal(err, color=False), **kwargs)
    return out.getvalue(), err.getvalue()


# --- diff --------------------------------------------------------------------------


def test_diff_headers_and_hunks():
    diff = unified_diff(migrated())
    assert diff.startswith("--- a/train.py\n+++ b/train.py\n@@ ")
    assert "-loss.backward()\n+accelerator.backward(loss)\n" in diff


def test_diff_is_empty_when_nothing_changed():
    assert unified_diff(migrated("x = 1\n")) == ""


def test_diff_marks_a_missing_final_newline():
    result = FileResult("a.py", FileStatus.CHANGED, "x = 1", "x = 2")
    assert unified_diff(result).endswith("-x = 1\n\\ No newline at end of file\n+x = 2\n\\ No newline at end of file\n")


def test_diff_keeps_crlf_and_form_feeds_inside_lines():
    before = "a = 1\r\nb = '\x0c'\r\nc = 3\r\n"
    result = FileResult("a.py", FileStatus.CHANGED, before, before.replace("c = 3", "c = 4"))
    diff = unified_diff(result)
    assert "-c = 3\r\n+c = 4\r\n" in diff
    assert " b = '\x0c'\r\n" in diff


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_diff_applies_with_git_apply(tmp_path):
    result = migrated()
    (tmp_path / "train.py").write_text(HAZARD)
    (tmp_path / "fix.patch").write_text(unified_diff(result))
    subprocess.run(["git", "apply", "fix.patch"], cwd=tmp_path, check=True, timeout=60)
    assert (tmp_path / "train.py").read_text() == result.after


# --- text --------------------------------------------------------------------------


def test_text_lint_lists_findings_with_fix_marks():
    out, err = text_output(RunReport(Mode.LINT, [migrated(fix=False)]))
    assert "train.py:6:1: AM301 `loss.backward()` bypasses the Accelerator [*]\n" in out
    assert err.startswith("Found ")
    assert "\x1b[" not in out + err


def test_text_diff_prints_the_diff_then_only_what_is_left():
    result = migrated()
    out, err = text_output(RunReport(Mode.DIFF, [result]))
    assert out.startswith("--- a/train.py\n")
    assert "AM301" not in out  # fixed: it is in the diff, not in the list
    assert "1 file would be migrated" in err


def test_text_check_names_the_files_that_would_change():
    out, _ = text_output(RunReport(Mode.CHECK, [migrated(), migrated("x = 1\n", "clean.py")]))
    assert "Would rewrite train.py\n" in out
    assert "clean.py" not in out


def test_text_errors_go_to_stderr_as_one_line():
    out, err = text_output(RunReport(Mode.LINT, [failed()]))
    assert out == ""
    assert "bad.py:2:7: error: cannot parse: invalid syntax\n" in err


def test_text_statistics_replace_the_list():
    out, _ = text_output(RunReport(Mode.LINT, [migrated(fix=False)]), statistics=True)
    assert "train.py:" not in out
    assert any(line.split()[:2] == ["1", "AM301"] for line in out.splitlines())


def test_text_colour_only_when_asked():
    out = io.StringIO()
    render(RunReport(Mode.LINT, [migrated(fix=False)]), Terminal(out, color=True), Terminal(io.StringIO(), color=False))
    assert "\x1b[" in out.getvalue()


@pytest.mark.parametrize(
    "mode, results, expected",
    [
        (Mode.LINT, [], "No Python files found."),
        (Mode.LINT, [FileResult("a.py", FileStatus.UNCHANGED, "x", "x")], "All checks passed."),
        (Mode.CHECK, [FileResult("a.py", FileStatus.UNCHANGED, "x", "x")], "Nothing to migrate."),
        (Mode.LINT, [failed()], "1 file could not be processed."),
    ],
)
def test_summary_line(mode, results, expected):
    assert summary_line(RunReport(mode, results)) == expected


def test_summary_line_counts_files_and_fixes():
    result = migrated()
    fixes = sum(f.fixed for f in result.findings)
    assert summary_line(RunReport(Mode.WRITE, [result, failed()])) == (
        f"Migrated 1 file ({fixes} fixes). 1 file could not be processed."
    )
    assert summary_line(RunReport(Mode.DIFF, [result])) == (
        f"1 file would be migrated ({fixes} fixes). Run with --write to apply."
    )


# --- json --------------------------------------------------------------------------


def test_json_has_the_documented_keys():
    data = json.loads(json_format.render(RunReport(Mode.DIFF, [migrated(), failed()])))
    assert [f["status"] for f in data] == ["changed", "failed"]
    first = data[0]
    assert set(first) == {"path", "status", "error", "diff", "findings", "report"}
    assert first["report"].startswith("## `train.py` — migrated")
    assert first["diff"].startswith("--- a/train.py")
    finding = next(f for f in first["findings"] if f["code"] == "AM301")
    assert set(finding) == {"path", "line", "col", "end_line", "end_col", "code", "name", "message", "fixable", "fixed",
                            "cell"}
    assert (finding["line"], finding["col"], finding["fixed"], finding["cell"]) == (6, 1, True, None)
    assert data[1]["error"]["code"] == "E001"


def test_json_lint_has_no_diff_and_statistics_count_codes():
    report = RunReport(Mode.LINT, [migrated(fix=False)])
    assert json.loads(json_format.render(report))[0]["diff"] is None
    stats = json.loads(json_format.render(report, statistics=True))
    assert {"code": "AM301", "name": "tensor-backward", "count": 1, "fixed": 0, "fixable": 1} in stats


# --- github ------------------------------------------------------------------------


def test_github_workflow_commands():
    lines = github.render(RunReport(Mode.LINT, [migrated(fix=False), failed()])).splitlines()
    assert (
        "::warning file=train.py,line=6,col=1,endLine=6,endColumn=16,"
        "title=AM301 tensor-backward::`loss.backward()` bypasses the Accelerator"
    ) in lines
    assert lines[-1].startswith("::error file=bad.py,line=2,col=7,")


def test_github_escapes_data_and_properties():
    finding = Finding("we,ird:x.py", Position(1, 1), Position(1, 2), "AM101", "n", "100% sure\nnext line")
    line = github.command("warning", finding, "t:x")
    assert line == "::warning file=we%2Cird%3Ax.py,line=1,col=1,endLine=1,endColumn=2,title=t%3Ax::100%25 sure%0Anext line"


# --- sarif -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sarif_validator():
    schema = json.loads((DATA / "sarif-2.1.0-subset.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


@pytest.mark.parametrize("mode", [Mode.LINT, Mode.DIFF])
def test_sarif_validates_against_the_schema(sarif_validator, mode):
    report = RunReport(mode, [migrated(fix=mode.fixing), failed(), migrated("x = 1\n", "/abs/clean.py")])
    log = json.loads(sarif.render(report, registry.all_rules(), "0.1.0"))
    errors = sorted(sarif_validator.iter_errors(log), key=str)
    assert not errors, "\n".join(str(e) for e in errors[:3])


def test_sarif_rules_and_results_agree():
    rules = registry.all_rules()
    log = json.loads(sarif.render(RunReport(Mode.LINT, [migrated(fix=False), failed()]), rules, "0.1.0"))
    run = log["runs"][0]
    descriptors = run["tool"]["driver"]["rules"]
    assert [d["id"] for d in descriptors] == [r.code for r in rules]
    assert all(d["fullDescription"]["text"] and "helpUri" not in d for d in descriptors)
    for result in run["results"]:
        assert descriptors[result["ruleIndex"]]["id"] == result["ruleId"]
    backward = next(r for r in run["results"] if r["ruleId"] == "AM301")
    region = backward["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (6, 1)
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert invocation["toolExecutionNotifications"][0]["descriptor"]["id"] == "E001"


def test_sarif_schema_subset_rejects_what_sarif_rejects(sarif_validator):
    """The vendored subset is not a rubber stamp: it fails logs the official schema fails."""
    bad_logs = [
        {"version": "2.0.0", "runs": []},
        {"version": "2.1.0"},
        {"version": "2.1.0", "runs": [{"tool": {"driver": {}}}]},
        {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"ruleId": "A"}]}]},
        {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [
            {"message": {"text": "m"}, "level": "fatal"}]}]},
        {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [
            {"message": {"text": "m"}, "locations": [{"physicalLocation": {"region": {"startLine": 0}}}]}]}]},
    ]
    for log in bad_logs:
        assert list(sarif_validator.iter_errors(log)), log
