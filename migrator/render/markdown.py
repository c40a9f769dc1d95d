"""`--report FILE`: the migration report a team lead reads before approving a migration.

A pure function of the per-file results: for each file, every change the migrator made and
every place left for a human (with the reason and what to do, which is the finding's
message), then totals. Markdown, so it reads in a terminal, a pull request or a wiki page.
Nothing here prints, reads files or knows a rule by import.
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from migrator.findings import FileResult, FileStatus, Finding

_STATUS = {
    FileStatus.CHANGED: "migrated",
    FileStatus.UNCHANGED: "unchanged",
    FileStatus.FAILED: "failed",
    FileStatus.SKIPPED: "skipped",
}


@dataclass(frozen=True)
class _Lines:
    """Lines added and removed between a file's text before and after."""

    added: int
    removed: int

    @classmethod
    def of(cls, result: FileResult) -> "_Lines":
        if result.before is None or result.after is None or result.before == result.after:
            return cls(0, 0)
        added = removed = 0
        matcher = difflib.SequenceMatcher(a=result.before.splitlines(), b=result.after.splitlines(), autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                removed += i2 - i1
                added += j2 - j1
        return cls(added, removed)


def render_report(results: Sequence[FileResult], title: str = "Migration report") -> str:
    """The whole report: a summary, one section per file, totals per rule."""
    results = list(results)
    out: list[str] = [f"# {title}", ""]
    out += _summary(results)
    for result in results:
        out += _file_section(result)
    out += _totals(results)
    return "\n".join(out).rstrip("\n") + "\n"


def _summary(results: list[FileResult]) -> list[str]:
    statuses = Counter(r.status for r in results)
    applied = sum(1 for r in results for f in r.findings if f.fixed)
    left = sum(len(r.remaining) for r in results) + statuses[FileStatus.FAILED]
    parts = [f"{statuses[s]} {_STATUS[s]}" for s in _STATUS if statuses[s]]
    verdict = "Nothing is left for a human." if not left else f"**{left} item{_s(left)} left for a human** (listed per file below)."
    return [
        f"{len(results)} file{_s(len(results))}: {', '.join(parts) or 'none'}. "
        f"{applied} change{_s(applied)} applied. {verdict}",
        "",
    ]


def file_report(result: FileResult) -> str:
    """One file's section of the report (the `report` field of the JSON output)."""
    return "\n".join(_file_section(result)).rstrip("\n") + "\n"


def _file_section(result: FileResult) -> list[str]:
    lines = _Lines.of(result)
    out = [f"## `{result.path}` — {_STATUS[result.status]}", ""]
    if result.status is FileStatus.FAILED:
        error = result.error
        where = f"line {error.place}: " if error is not None else ""
        reason = error.message if error is not None else "unknown error"
        out += [f"- [ ] **Not migrated**: {where}{_inline(reason)} ({error.code if error else 'E000'}). "
                "Nothing was written; fix the cause and run again.", ""]
        return out
    if result.status is FileStatus.SKIPPED:
        return out + ["Skipped (see the error reported for its configuration).", ""]
    fixed = sorted((f for f in result.findings if f.fixed), key=Finding.sort_key)
    left = sorted(result.remaining, key=Finding.sort_key)
    if result.status is FileStatus.CHANGED:
        out += [f"{len(fixed)} change{_s(len(fixed))}, {lines.added} line{_s(lines.added)} added, "
                f"{lines.removed} removed; {len(result.touched_lines)} original line{_s(len(result.touched_lines))} rewritten.", ""]
    if fixed:
        out += [f"### Changes ({len(fixed)}) (lines of the original file)", "", "| Line | Rule | Change |", "|---:|---|---|"]
        out += [f"| {f.place} | {f.code} `{f.name}` | {_cell(f.message)} |" for f in fixed]
        out.append("")
    if left:
        where = " (lines of the migrated file)" if result.status is FileStatus.CHANGED else ""
        out += [f"### Left for a human ({len(left)}){where}", ""]
        out += [f"- [ ] **line {f.place}** {f.code} `{f.name}`: {_inline(f.message)}{_fix_note(f)}" for f in left]
        out.append("")
    if not fixed and not left:
        out += ["Nothing to migrate.", ""]
    return out


def _fix_note(finding: Finding) -> str:
    if not finding.fixable:
        return ""
    if finding.unsafe_fix:
        return " _(a fix exists but changes behaviour: review, then run with `--unsafe-fixes`)_"
    return " _(a fix exists: run with `--write`)_"


def _totals(results: list[FileResult]) -> list[str]:
    applied: Counter[tuple[str, str]] = Counter()
    left: Counter[tuple[str, str]] = Counter()
    for result in results:
        for f in result.findings:
            (applied if f.fixed else left)[(f.code, f.name)] += 1
    failed = sum(1 for r in results if r.status is FileStatus.FAILED)
    out = ["## Totals", ""]
    keys = sorted(set(applied) | set(left))
    if keys:
        out += ["| Rule | Applied | Left for a human |", "|---|---:|---:|"]
        out += [f"| {code} `{name}` | {applied[(code, name)]} | {left[(code, name)]} |" for code, name in keys]
        out.append(f"| **all rules** | **{sum(applied.values())}** | **{sum(left.values())}** |")
        out.append("")
    changed = sum(1 for r in results if r.status is FileStatus.CHANGED)
    added = removed = 0
    for result in results:
        lines = _Lines.of(result)
        added, removed = added + lines.added, removed + lines.removed
    out.append(
        f"{len(results)} file{_s(len(results))}, {changed} migrated, {failed} failed; "
        f"{sum(applied.values())} change{_s(sum(applied.values()))} applied "
        f"(+{added} −{removed} lines); {sum(left.values()) + failed} item{_s(sum(left.values()) + failed)} left for a human."
    )
    return out


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return _inline(text).replace("|", "\\|")


def _inline(text: str) -> str:
    return " ".join(text.split())


def _s(n: int) -> str:
    return "" if n == 1 else "s"

