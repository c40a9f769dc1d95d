"""The human format: diffs, `path:line:col: CODE message` lines, a summary, the rule
table and rule pages. Colour through rich on a terminal, plain text otherwise (piped,
`NO_COLOR`), so pre-commit and CI logs never see escape codes and never import rich.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, TextIO

from migrator.findings import FileResult, Finding
from migrator.render.diff import line_style, unified_diff
from migrator.render.report import Mode, RunReport

if TYPE_CHECKING:
    from migrator.rule import Rule

Segment = tuple[str, "str | None"]


def wants_color(stream: TextIO) -> bool:
    """The no-color.org and force-color conventions, then "is it a terminal"."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


class Terminal:
    """One output stream that writes styled segments, coloured only when it should be."""

    def __init__(self, stream: TextIO, color: bool | None = None) -> None:
        self.stream = stream
        self.color = wants_color(stream) if color is None else color
        self._console = None

    @property
    def console(self):
        """A rich Console on this stream (imported on first use)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(
                file=self.stream, force_terminal=self.color, no_color=not self.color,
                highlight=False, soft_wrap=True, emoji=False, markup=False,
            )
        return self._console

    def write(self, *segments: Segment) -> None:
        """One line made of (text, style) segments."""
        if not self.color:
            self.stream.write("".join(text for text, _ in segments) + "\n")
            return
        from rich.text import Text

        line = Text()
        for text, style in segments:
            line.append(text, style=style or "")
        self.console.print(line)

    def raw(self, text: str) -> None:
        """Text written exactly as given (a diff keeps its CRLF lines when piped)."""
        if not self.color:
            self.stream.write(text)
            return
        for line in text.splitlines():
            self.write((line, line_style(line)))


def finding_segments(finding: Finding, report: RunReport) -> list[Segment]:
    """`path:line:col: CODE message [*]` in pieces a terminal can colour."""
    segments: list[Segment] = [
        (finding.path, "bold"), (f":{finding.place}: ", None),
        (finding.code, "bold red"), (f" {finding.message}", None),
    ]
    if report.fix_offered(finding):
        segments.append((" [*]", "cyan"))
    return segments


def error_segments(result: FileResult) -> list[Segment]:
    """`path:line:col: error: reason` for a file that could not be processed."""
    error = result.error
    if error is None:
        return [(result.path, "bold"), (": error: could not be processed", "bold red")]
    return [(f"{error.path}:{error.place}: ", "bold"), ("error: ", "bold red"), (error.message, None)]


def render(report: RunReport, out: Terminal, err: Terminal, *, statistics: bool = False) -> None:
    """The whole run for a human: diffs, findings (or statistics), errors, a summary."""
    for result in report.processed:
        if report.mode is Mode.DIFF:
            out.raw(unified_diff(result))
        elif report.mode is Mode.CHECK and result.changed:
            out.write(("Would rewrite ", None), (result.path, "bold"))
        elif report.mode is Mode.WRITE and result.changed and not report.output:
            err.write(("Rewrote ", None), (result.path, "bold"), (f" ({_plural(report.fixes_applied(result), 'fix')})", None))
        if not statistics:
            for finding in report.shown(result):
                out.write(*finding_segments(finding, report))
    if statistics:
        render_statistics(report, out)
    for result in report.failed:
        err.write(*error_segments(result))
    if report.output and report.results and not report.failed:
        err.write(("Wrote ", None), (report.output, "bold"))
    summary = summary_line(report)
    if summary:
        err.write((summary, "dim" if not report.failed else None))


def render_statistics(report: RunReport, out: Terminal) -> None:
    """`--statistics`: findings per code, most frequent first."""
    for row in report.statistics():
        extra = f"  ({row.fixed} fixed)" if report.mode.fixing else ""
        mark = " [*]" if row.fixable else ""
        out.write((f"{row.count:>5}  ", None), (row.code, "bold red"), (f"  {row.name}{mark}{extra}", None))


def summary_line(report: RunReport) -> str:
    """One sentence on what happened and what to run next."""
    if not report.results:
        return "No Python files found."
    shown = report.all_shown()
    parts = [_migration_summary(report, shown) if report.mode.fixing else _lint_summary(report, shown)]
    if report.failed:
        parts.append(f"{_plural(len(report.failed), 'file')} could not be processed.")
    return " ".join(part for part in parts if part)


def _lint_summary(report: RunReport, shown: list[Finding]) -> str:
    if not shown:
        return "" if report.failed else "All checks passed."
    text = f"Found {_plural(len(shown), 'finding')}."
    offered = sum(1 for f in shown if report.fix_offered(f))
    if offered:
        text += f" [*] {offered} fixable with --write"
        text += " (see the changes with --diff)." if report.mode is Mode.PREVIEW else "."
    return text


def _migration_summary(report: RunReport, shown: list[Finding]) -> str:
    changed = len(report.changed)
    fixes = _plural(sum(report.fixes_applied(r) for r in report.changed), "fix")
    left = f" {_plural(len(shown), 'finding')} left for a human." if shown else ""
    refused = sum(1 for r in report.results if r.refused)
    if refused:
        left += f" {_plural(refused, 'file')} left as written: the migration would not be coherent (AM95x/AM96x findings say why)."
    if not changed:
        return ("Nothing migrated." if refused or report.failed else "Nothing to migrate.") + left
    if report.mode is Mode.WRITE:
        return f"Migrated {_plural(changed, 'file')} ({fixes}).{left}"
    return f"{_plural(changed, 'file')} would be migrated ({fixes}).{left} Run with --write to apply."


def _plural(n: int, word: str) -> str:
    suffix = "es" if word.endswith("x") else "s"
    return f"{n} {word}" if n == 1 else f"{n} {word}{suffix}"


def render_rule_table(rules: Iterable[type[Rule]], out: Terminal) -> None:
    """`--list-rules`: a rich table of every rule (code, name, fix, summary)."""
    from rich.table import Table

    from migrator.docs import fix_label, rule_summary

    table = Table(title=None, show_lines=False, header_style="bold")
    table.add_column("Code", style="bold red", no_wrap=True)
    table.add_column("Name", no_wrap=True)
    table.add_column("Fix", no_wrap=True)
    table.add_column("Summary")
    for rule in rules:
        table.add_row(rule.code, rule.name, fix_label(rule), rule_summary(rule))
    out.console.print(table)


def render_markdown(text: str, out: Terminal) -> None:
    """A rule page: rendered on a terminal, the Markdown itself when piped."""
    if not out.color:
        out.stream.write(text)
        return
    from rich.markdown import Markdown

    out.console.print(Markdown(text))
