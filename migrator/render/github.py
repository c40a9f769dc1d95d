"""`--output-format github`: GitHub Actions workflow commands, one per line, which the
Actions runner turns into annotations on the pull request's diff.

https://docs.github.com/en/actions/reference/workflow-commands-for-github-actions
"""

from __future__ import annotations

from migrator.findings import Finding
from migrator.render.report import Mode, RunReport


def _data(text: str) -> str:
    """Escape a command's message (the part after `::`)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    """Escape a property value (file=, title=): also `:` and `,`."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, finding: Finding, title: str) -> str:
    if finding.cell is not None:  # lines in a notebook cell are not lines of the file
        props = f"file={_property(finding.path)},title={_property(title)}"
        return f"::{level} {props}::{_data(f'{finding.place}: {finding.message}')}"
    props = (
        f"file={_property(finding.path)},line={finding.start.line},col={finding.start.col},"
        f"endLine={finding.end.line},endColumn={finding.end.col},title={_property(title)}"
    )
    return f"::{level} {props}::{_data(finding.message)}"


def render(report: RunReport) -> str:
    """Warnings for findings, errors for files that failed, a notice per file that the
    migration would change (in --diff/--check)."""
    lines = []
    for result in report.processed:
        if report.mode in (Mode.DIFF, Mode.CHECK) and result.changed:
            message = "accel-migrate would migrate this file; run accel-migrate --write"
            lines.append(f"::warning file={_property(result.path)},title=accel-migrate::{_data(message)}")
        for finding in report.shown(result):
            lines.append(command("warning", finding, f"{finding.code} {finding.name}"))
    for result in report.failed:
        if result.error is not None:
            lines.append(command("error", result.error, f"accel-migrate {result.error.code}"))
    return "".join(line + "\n" for line in lines)
