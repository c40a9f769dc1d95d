"""`--output-format json`: one object per file, findings with their full position.

Stable keys for scripts: path, status, error, diff (only when the run migrated), and
findings with path, line, col, end_line, end_col, code, name, message, fixable, fixed,
and cell (1-based in a notebook, where line counts from the top of the cell; else null);
and report, the file's section of the Markdown migration report (`--report FILE`).
"""

from __future__ import annotations

import json
from typing import Any

from migrator.findings import FileResult, Finding
from migrator.render.diff import unified_diff
from migrator.render.markdown import file_report
from migrator.render.report import RunReport


def finding_dict(finding: Finding) -> dict[str, Any]:
    """A finding as JSON-ready data (also the shape of `error`)."""
    return {
        "path": finding.path,
        "line": finding.start.line,
        "col": finding.start.col,
        "end_line": finding.end.line,
        "end_col": finding.end.col,
        "code": finding.code,
        "name": finding.name,
        "message": finding.message,
        "fixable": finding.fixable,
        "fixed": finding.fixed,
        "cell": finding.cell,
    }


def file_dict(result: FileResult, report: RunReport) -> dict[str, Any]:
    return {
        "path": result.path,
        "status": result.status.value,
        "error": finding_dict(result.error) if result.error else None,
        "diff": unified_diff(result) if report.mode.fixing else None,
        "findings": [finding_dict(f) for f in sorted(result.findings, key=Finding.sort_key)],
        "report": file_report(result),
    }


def render(report: RunReport, *, statistics: bool = False) -> str:
    """The JSON document: a list of files, or of per-code counts with --statistics."""
    if statistics:
        data: Any = [
            {"code": r.code, "name": r.name, "count": r.count, "fixed": r.fixed, "fixable": r.fixable}
            for r in report.statistics()
        ]
    else:
        data = [file_dict(r, report) for r in report.processed]
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
