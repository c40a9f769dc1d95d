"""What a run reports: findings (one place, one code, one message) and per-file results.

Values only; nothing here prints or touches files.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


# The codes of a refusal (the verifier's AM950-AM959, and AM960 for a freeze or a constant
# loss term while training): a finding with one means the file was left as written.
REFUSAL_PREFIXES = ("AM95", "AM96")


def is_refusal(code: str) -> bool:
    return code.startswith(REFUSAL_PREFIXES)


class Severity(enum.Enum):
    """How serious a finding is; `error` is reserved for input and internal errors."""

    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True, order=True)
class Position:
    """A 1-based line and 1-based column, as editors and compilers print them."""

    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.line}:{self.col}"


@dataclass(frozen=True)
class Finding:
    """One place in one file that a rule has something to say about.

    `fixed` tells whether the engine applied the rule's fix in this run; a finding that
    is not fixed is what a human still has to look at.
    """

    path: str
    start: Position
    end: Position
    code: str
    name: str
    message: str
    fixable: bool = False
    fixed: bool = False
    unsafe_fix: bool = False
    severity: Severity = Severity.WARNING
    cell: int | None = None  # in a notebook: the 1-based cell; `start`/`end` count lines in it

    @property
    def place(self) -> str:
        """`line:col`, or `cell N:line:col` in a notebook (Ruff's form)."""
        return f"cell {self.cell}:{self.start}" if self.cell is not None else str(self.start)

    def sort_key(self) -> tuple:
        """Stable order: by file, then place, then code."""
        return (self.path, self.cell or 0, self.start, self.code, self.message)

    def __str__(self) -> str:
        mark = " [*]" if self.fixable and not self.fixed else ""
        return f"{self.path}:{self.place}: {self.code} {self.message}{mark}"


class FileStatus(enum.Enum):
    """The outcome for one file; the CLI maps these to exit codes."""

    UNCHANGED = "unchanged"
    CHANGED = "changed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class FileResult:
    """Everything a run learnt about one file. Never raised: returned.

    `before`/`after` are the decoded source texts (equal when nothing changed, `after`
    is None when the file failed). `error` is a one-line reason for FAILED results.
    """

    path: str
    status: FileStatus
    before: str | None = None
    after: str | None = None
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    error: Finding | None = None
    encoding: str = "utf-8"
    touched_lines: frozenset[int] = frozenset()  # original lines that accepted edits replaced

    @property
    def changed(self) -> bool:
        return self.status is FileStatus.CHANGED

    @property
    def refused(self) -> bool:
        """The migration was not coherent, so the file was left as written (AM95x)."""
        return any(is_refusal(f.code) for f in self.findings)

    @property
    def remaining(self) -> tuple[Finding, ...]:
        """Findings a human still has to act on (not fixed by this run)."""
        return tuple(f for f in self.findings if not f.fixed)
