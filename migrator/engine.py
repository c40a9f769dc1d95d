"""The pass loop: analyse, run all rules in one batched traversal, resolve overlapping
fixes, apply, repeat to a fixpoint, verify the result compiles.

Everything here is about one module already parsed; reading and writing files is
files.py's job and turning results into output is render/'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrator.analysis import ScriptAnalysis, analyze
from migrator.config import Config
from migrator.edits import EditPlan, apply_edits
from migrator.findings import Finding, Position
from migrator.imports import apply_imports
from migrator.rule import Report, Rule, RuleContext
from migrator.suppress import is_suppressed

MAX_PASSES = 6


class VerificationError(Exception):
    """The rewritten code does not compile: a bug in a rule, never the user's fault."""


@dataclass(frozen=True)
class EngineOutcome:
    module: cst.Module
    findings: tuple[Finding, ...]


def _finding(path: str, analysis: ScriptAnalysis, report: Report, fixed: bool) -> Finding:
    rng = analysis.position(report.node)
    return Finding(
        path=path,
        start=Position(rng.start.line, rng.start.column + 1),
        end=Position(rng.end.line, rng.end.column + 1),
        code=report.code,
        name=report.name,
        message=report.message,
        fixable=report.fixable,
        fixed=fixed,
        unsafe_fix=bool(report.fix and report.fix.unsafe),
    )


def _run_rules(
    module: cst.Module, rules: Sequence[type[Rule]], config: Config
) -> tuple[ScriptAnalysis, list[Report]]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    analysis = analyze(wrapper)
    ctx = RuleContext(config)
    visitors = [rule(analysis, ctx) for rule in rules]
    if visitors:
        wrapper.visit_batched(visitors)
    lines = module.code.splitlines()
    kept = [
        r
        for r in ctx.reports
        if not is_suppressed(lines, analysis.position(r.node).start.line, r.code, r.name)
    ]
    kept.sort(key=lambda r: (r.code, _start(analysis, r.node)))
    return analysis, kept


def _fix_allowed(report: Report, config: Config) -> bool:
    return report.fix is not None and (not report.fix.unsafe or config.unsafe_fixes)


def migrate_module(
    module: cst.Module, path: str, config: Config, rules: Sequence[type[Rule]]
) -> EngineOutcome:
    """Run `rules` over `module` to a fixpoint (or once, findings only, when not fixing).

    Fixed findings carry the position where they were found; the remaining ones carry
    their position in the returned module.
    """
    fixed: list[Finding] = []
    for _ in range(MAX_PASSES):
        analysis, reports = _run_rules(module, rules, config)
        if not config.fix:
            return EngineOutcome(module, tuple(_finding(path, analysis, r, False) for r in reports))
        plan = EditPlan(span_of=analysis.position)
        accepted = [r for r in reports if _fix_allowed(r, config) and plan.try_accept(r.fix)]
        if not accepted:
            remaining = [_finding(path, analysis, r, False) for r in reports]
            return EngineOutcome(module, tuple(fixed + remaining))
        fixed.extend(_finding(path, analysis, r, True) for r in accepted)
        module = apply_imports(apply_edits(module, plan.accepted), plan.accepted)
    analysis, reports = _run_rules(module, rules, config)
    remaining = [_finding(path, analysis, r, False) for r in reports]
    return EngineOutcome(module, tuple(fixed + remaining))


def verify(code: str, path: str) -> None:
    """Raise VerificationError when `code` does not compile."""
    try:
        compile(code, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise VerificationError(f"migrated code does not compile: {exc}") from exc


def _start(analysis: ScriptAnalysis, node: cst.CSTNode) -> tuple[int, int]:
    start = analysis.position(node).start
    return (start.line, start.column)
