"""The contract every rule module imports: the Rule base class and its declared traits.

A rule is a LibCST batchable visitor: the engine runs all rules in one traversal, each
reading the shared ScriptAnalysis and reporting findings with optional fixes. Rules never
edit the tree, print, or read files.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Iterable

import libcst as cst

from migrator.config import Config, Target
from migrator.edits import Edit, Fix, ImportChange
from migrator.notebook import is_notebook

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis


class FixAvailability(enum.Enum):
    """Declared, never inferred: the example harness checks that behaviour agrees."""

    ALWAYS = "always"
    SOMETIMES = "sometimes"
    NEVER = "never"


class Safety(enum.Enum):
    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True)
class Example:
    """A documented before/after pair; `at` lists the "line:col" of expected findings."""

    before: str
    after: str | None = None
    at: tuple[str, ...] = ()
    path: str = "example.py"  # the file it is checked as; "example.ipynb": a notebook's cells
    # For the verifier's codes: a migration of `before` that the verifier refuses (checked
    # against the verifier alone, so the example stays true as the rules improve).
    refused: str | None = None
    # For a rule that acts in a run of several files: the calls that run threads the
    # Accelerator into (Config.project_calls, set by migrator/project/).
    project_calls: tuple[str, ...] = ()
    project_states: tuple[tuple[str, tuple[int, ...], tuple[str, ...], bool], ...] = ()  # Config.project_states
    project_distribution: tuple = ()  # Config.project_distribution


@dataclass(frozen=True)
class Report:
    """What a rule hands the engine: a node, its message, and maybe a fix."""

    code: str
    name: str
    node: cst.CSTNode
    message: str
    fix: Fix | None
    fixable: bool


class RuleContext:
    """Per-file, per-rule collector; the only channel from a rule to the engine."""

    def __init__(self, config: Config, path: str = "<stdin>") -> None:
        self.config = config
        self.path = path
        self.reports: list[Report] = []

    @property
    def target(self) -> Target:
        return self.config.target

    @property
    def is_notebook(self) -> bool:
        """Whether the module is a notebook's code cells joined (migrator/notebook.py)."""
        return is_notebook(self.path)


class Rule(cst.BatchableCSTVisitor):
    """Base class. Subclasses declare the traits below and implement visit_* methods.

    The docstring of a subclass is its user-facing explanation (Markdown with the
    headings "What it does", "Why is this bad?", "Example", and "Fix safety" when unsafe).
    """

    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    fix_title: ClassVar[str | None] = None

    @classmethod
    def fix_title_for(cls, message: str) -> str | None:
        """`fix_title` in the words of one finding (its message): what a refused migration
        changed there, for the hand migration to do too. By default the rule's title."""
        return cls.fix_title
    fix: ClassVar[FixAvailability] = FixAvailability.NEVER
    safety: ClassVar[Safety] = Safety.SAFE
    targets: ClassVar[frozenset[Target]] = frozenset(Target)
    examples: ClassVar[tuple[Example, ...]] = ()
    # True for the refusal codes (AM95x, AM960): the engine's verifier reports them when it refuses a
    # migration (migrator/verify/); the rule class only names and documents the code.
    reported_by_verifier: ClassVar[bool] = False

    def __init__(self, analysis: "ScriptAnalysis", ctx: RuleContext) -> None:
        super().__init__()
        self.analysis = analysis
        self.ctx = ctx

    def report(
        self,
        node: cst.CSTNode,
        *,
        edits: Iterable[Edit] | Fix | None = None,
        add_imports: Iterable[ImportChange] = (),
        remove_imports: Iterable[ImportChange] = (),
        unsafe: bool = False,
        **fields: Any,
    ) -> None:
        """Report `node`; `fields` fill the `{placeholders}` of the rule's message.

        Pass `edits` (or a ready Fix, to share one fix between several findings) to make
        the finding fixable.
        """
        if isinstance(edits, Fix):
            fix: Fix | None = edits
        elif edits is not None:
            fix = Fix(
                tuple(edits),
                tuple(add_imports),
                tuple(remove_imports),
                unsafe or self.safety is Safety.UNSAFE,
            )
        else:
            fix = None
        self.ctx.reports.append(
            Report(self.code, self.name, node, self.message.format(**fields), fix, fix is not None)
        )
