"""What a whole run produced, in the shape every output format reads.

`Mode` is what the user asked for; `RunReport` holds the per-file results and answers
the questions renderers and exit codes ask (which findings to show, what changed).
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

from migrator.findings import FileResult, FileStatus, Finding


class Mode(enum.Enum):
    """The command-line mode; PREVIEW is what runs without a mode flag."""

    PREVIEW = "preview"
    LINT = "lint"
    DIFF = "diff"
    CHECK = "check"
    WRITE = "write"

    @property
    def fixing(self) -> bool:
        """Whether the run computes the migration (not only findings)."""
        return self in (Mode.DIFF, Mode.CHECK, Mode.WRITE)


@dataclass(frozen=True)
class CodeCount:
    """One row of `--statistics`."""

    code: str
    name: str
    count: int
    fixed: int
    fixable: int


@dataclass
class RunReport:
    """Every FileResult of a run plus how it was asked for."""

    mode: Mode
    results: list[FileResult] = field(default_factory=list)
    unsafe_fixes: bool = False
    output: str | None = None

    @property
    def processed(self) -> list[FileResult]:
        """Results worth reporting (SKIPPED ones were silenced by an earlier error)."""
        return [r for r in self.results if r.status is not FileStatus.SKIPPED]

    @property
    def failed(self) -> list[FileResult]:
        return [r for r in self.results if r.status is FileStatus.FAILED]

    @property
    def changed(self) -> list[FileResult]:
        return [r for r in self.results if r.status is FileStatus.CHANGED]

    def shown(self, result: FileResult) -> tuple[Finding, ...]:
        """The findings a human reads: all of them when linting, the unfixed ones after
        a migration (their positions are then in the migrated text)."""
        findings = result.remaining if self.mode.fixing else result.findings
        return tuple(sorted(findings, key=Finding.sort_key))

    def all_shown(self) -> list[Finding]:
        return [f for r in self.processed for f in self.shown(r)]

    def fix_offered(self, finding: Finding) -> bool:
        """Whether `[*]` goes on the finding: a fix exists and this run could apply it."""
        return finding.fixable and not finding.fixed and (self.unsafe_fixes or not finding.unsafe_fix)

    def fixes_applied(self, result: FileResult) -> int:
        return sum(1 for f in result.findings if f.fixed)

    def statistics(self) -> list[CodeCount]:
        """Findings counted per code over every file, most frequent first."""
        counts: Counter[str] = Counter()
        fixed: Counter[str] = Counter()
        fixable: Counter[str] = Counter()
        names: dict[str, str] = {}
        for result in self.processed:
            for finding in result.findings:
                counts[finding.code] += 1
                fixed[finding.code] += finding.fixed
                fixable[finding.code] += self.fix_offered(finding)
                names[finding.code] = finding.name
        return [
            CodeCount(code, names[code], n, fixed[code], fixable[code])
            for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        ]
