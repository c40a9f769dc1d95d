"""The Markdown migration report (migrator/render/markdown.py): a pure function of the
results, checked on hand-made results and on a real migration."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from migrator.api import migrate_source
from migrator.findings import FileResult, FileStatus, Finding, Position
from migrator.render.markdown import render_report


def _finding(line: int, code: str, message: str, *, fixed: bool = False, fixable: bool = False, unsafe: bool = False) -> Finding:
    return Finding("train.py", Position(line, 1), Position(line, 5), code, f"rule-{code.lower()}", message,
                   fixable=fixable or fixed, fixed=fixed, unsafe_fix=unsafe)


def _changed() -> FileResult:
    findings = (
        _finding(3, "AM001", "Training script has no Accelerator", fixed=True),
        _finding(9, "AM301", "`loss.backward()` bypasses the Accelerator", fixed=True),
        _finding(12, "AM404", "Mixed precision left as written: a | b"),
        _finding(14, "AM510", "`torch.save` writes from every process", fixable=True, unsafe=True),
    )
    return FileResult("train.py", FileStatus.CHANGED, "a\nb\nc\n", "a\nB\nc\nd\n", findings, touched_lines=frozenset({2}))


def test_lists_every_change_and_every_item_left_per_file() -> None:
    report = render_report([_changed()])
    assert report.startswith("# Migration report\n")
    assert "## `train.py` — migrated" in report
    assert "### Changes (2) (lines of the original file)" in report
    assert "| 3:1 | AM001 `rule-am001` | Training script has no Accelerator |" in report
    assert "| 9:1 | AM301 `rule-am301` | `loss.backward()` bypasses the Accelerator |" in report
    assert "### Left for a human (2) (lines of the migrated file)" in report
    assert "- [ ] **line 12:1** AM404 `rule-am404`: Mixed precision left as written: a | b" in report
    assert "run with `--unsafe-fixes`" in report  # the unsafe fix that was not applied
    assert "2 changes, 2 lines added, 1 removed; 1 original line rewritten." in report


def test_totals_per_rule_and_overall() -> None:
    unchanged = FileResult("clean.py", FileStatus.UNCHANGED, "x\n", "x\n")
    report = render_report([_changed(), unchanged])
    totals = report.split("## Totals", 1)[1]
    assert "| AM001 `rule-am001` | 1 | 0 |" in totals
    assert "| AM404 `rule-am404` | 0 | 1 |" in totals
    assert "| **all rules** | **2** | **2** |" in totals
    assert totals.rstrip().endswith(
        "2 files, 1 migrated, 0 failed; 2 changes applied (+2 −1 lines); 2 items left for a human."
    )
    assert "## `clean.py` — unchanged\n\nNothing to migrate." in report
    assert "2 files: 1 migrated, 1 unchanged. 2 changes applied. **2 items left for a human**" in report


def test_a_failed_file_is_an_item_left_for_a_human() -> None:
    error = Finding("bad.py", Position(4, 7), Position(4, 7), "E001", "e001", "cannot parse: unexpected token")
    report = render_report([FileResult("bad.py", FileStatus.FAILED, error=error)])
    assert "## `bad.py` — failed" in report
    assert "- [ ] **Not migrated**: line 4:7: cannot parse: unexpected token (E001)" in report
    assert report.rstrip().endswith("1 item left for a human.")


def test_pipes_in_a_change_do_not_break_the_table() -> None:
    fixed = _finding(1, "AM214", "`a | b` tests the rank", fixed=True)
    report = render_report([FileResult("t.py", FileStatus.CHANGED, "a\n", "b\n", (fixed,))])
    assert "| 1:1 | AM214 `rule-am214` | `a \\| b` tests the rank |" in report


def test_an_empty_run() -> None:
    report = render_report([])
    assert "0 files: none. 0 changes applied. Nothing is left for a human." in report


def test_report_of_a_real_migration() -> None:
    source = (
        "import torch\n\nmodel = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "loss = model(torch.zeros(1, 2)).sum()\nloss.backward()\n"
        "if torch.distributed.is_initialized():\n    dist_all = torch.distributed.all_gather([], loss)\n"
    )
    result = migrate_source(source, "tiny.py")
    report = render_report([result])
    assert "## `tiny.py` — migrated" in report
    assert "AM001 `missing-accelerator`" in report and "AM301 `tensor-backward`" in report
    assert "- [ ] **line" in report and "AM911 `raw-distributed-call`" in report


# --- through the command line --------------------------------------------------------

HAZARD = (
    "import torch\n\n"
    "model = torch.nn.Linear(2, 2)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "loss = model(torch.ones(2)).sum()\n"
    "loss.backward()\n"
    "if torch.distributed.is_initialized():\n"
    "    torch.distributed.all_gather([], loss)\n"
)


def _cli(*args: str, cwd) -> "subprocess.CompletedProcess[str]":
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    return subprocess.run([sys.executable, "-m", "migrator", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_writes_the_report_next_to_a_diff(tmp_path) -> None:
    (tmp_path / "train.py").write_text(HAZARD)
    proc = _cli("train.py", "--diff", "--report", "report.md", cwd=tmp_path)
    assert proc.returncode == 1, proc
    assert proc.stdout.startswith("--- a/train.py")
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# Migration report\n")
    assert "## `train.py` — migrated" in report
    assert "AM301 `tensor-backward`" in report
    assert "### Left for a human (1)" in report and "AM911 `raw-distributed-call`" in report
    assert (tmp_path / "train.py").read_text() == HAZARD  # --diff writes nothing but the report


def test_cli_json_output_carries_each_file_report(tmp_path) -> None:
    (tmp_path / "train.py").write_text(HAZARD)
    proc = _cli("train.py", "--diff", "--output-format", "json", cwd=tmp_path)
    data = json.loads(proc.stdout)
    assert data[0]["report"].startswith("## `train.py` — migrated")


def test_cli_report_that_cannot_be_written_is_a_usage_error(tmp_path) -> None:
    (tmp_path / "train.py").write_text(HAZARD)
    proc = _cli("train.py", "--report", str(tmp_path / "missing" / "report.md"), cwd=tmp_path)
    assert proc.returncode == 2
    assert "cannot write the report" in proc.stderr
