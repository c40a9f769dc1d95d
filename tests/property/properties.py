"""The properties every migration must have, as functions that return problems.

Each check returns a list of one-line problem descriptions instead of asserting, so one
script is checked against every property at once and a known, still open bug (see
KNOWN_BUGS) does not hide an unrelated failure on the same script.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import re
import symtable
from dataclasses import dataclass

import libcst as cst

from migrator.api import migrate_source
from migrator.config import Config, Target
from migrator.findings import FileResult, FileStatus, Finding, Severity

PATH = "generated.py"
MODES = {
    "fix": Config(),
    "lint": Config(fix=False),
    "accelerate": Config(target=Target.ACCELERATE),
}


@dataclass(frozen=True)
class KnownBug:
    """An open bug the property tests tolerate until it is fixed. `pattern` matches the
    problem line; `regression` names the strict-xfail test in test_regressions.py that
    starts to XPASS (and so fail) once the bug is fixed, the cue to delete this entry."""

    pattern: str
    regression: str


KNOWN_BUGS: dict[str, KnownBug] = {
    "comment-dropped": KnownBug(
        r"^line \d+ changed but no fixed finding covers it: '#",
        "comment-above-a-removed-import-is-dropped",
    ),
    "finding-columns": KnownBug(
        r"^finding column out of range: .* in the original text",
        "fixed-finding-columns-from-a-later-pass",
    ),
}


def known_bug(problem: str) -> str | None:
    """The KNOWN_BUGS key that explains `problem`, if any."""
    for key, bug in KNOWN_BUGS.items():
        if re.search(bug.pattern, problem):
            return key
    return None


def _outside(text: str, finding: Finding, which: str) -> list[str]:
    lines = text.splitlines()
    where = f"{finding} ({finding.start}-{finding.end} in the {which} text of {len(lines)} lines)"
    for pos in (finding.start, finding.end):
        if not 1 <= pos.line <= len(lines):
            return [f"finding line out of range: {where}"]
        if not 1 <= pos.col <= len(lines[pos.line - 1]) + 1:
            return [f"finding column out of range: {where}"]
    if finding.end < finding.start:
        return [f"finding ends before it starts: {where}"]
    return []


def malformed_findings(result: FileResult) -> list[str]:
    """Well-formed findings: stable code and name shapes, one-line message, and a place
    inside the file (fixed findings in the original text, the others in the result)."""
    problems = []
    for f in result.findings:
        if f.path != PATH:
            problems.append(f"finding names another path: {f}")
        if not re.fullmatch(r"AM\d{3}", f.code) or not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", f.name):
            problems.append(f"finding code or name malformed: {f.code} {f.name}")
        if not f.message or "\n" in f.message:
            problems.append(f"finding message empty or multi-line: {f!r}")
        if f.severity is not Severity.WARNING:
            problems.append(f"rule finding with severity {f.severity}: {f}")
        if f.fixed and not f.fixable:
            problems.append(f"finding fixed but not fixable: {f}")
        problems += _outside(result.before if f.fixed else result.after, f, "original" if f.fixed else "migrated")
    return problems


def duplicate_findings(result: FileResult) -> list[str]:
    """One place, one code, one message, once: the same finding twice is usually a fix
    that does not converge and is re-applied on every pass."""
    seen, problems = set(), []
    for f in result.findings:
        key = (f.code, f.start, f.end, f.message, f.fixed)
        if key in seen:
            problems.append(f"duplicate finding: {f.code} {f.message}{' (fixed)' if f.fixed else ''}")
        seen.add(key)
    return sorted(set(problems))


_BUILTINS = frozenset(dir(builtins))


def unbound_globals(code: str) -> set[str]:
    """Names some scope reads as globals that the module never binds: NameErrors
    waiting to happen (or names only a star import could supply)."""
    top = symtable.symtable(code, PATH, "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    wanted: set[str] = set()
    tables = [top]
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        for sym in table.get_symbols():
            if sym.is_referenced() and (table is top or sym.is_global()):
                wanted.add(sym.get_name())
    return wanted - bound - _BUILTINS


def new_unbound_names(result: FileResult) -> list[str]:
    """The migration introduces no name its scope cannot see (`accelerator` in a
    function nobody handed it to, `self` outside a class)."""
    new = unbound_globals(result.after) - unbound_globals(result.before)
    return [f"migrated code reads unbound name {name!r}" for name in sorted(new)]


def untouched_lines_changed(result: FileResult) -> list[str]:
    """Formatting and comments outside the changed expressions survive: every original
    line that changed or went away is one an accepted edit replaced (`touched_lines`),
    an import line (LibCST's import passes manage those) or blank. The same check as
    tests/test_fixtures.py, on every generated script."""
    before, after = result.before.splitlines(), result.after.splitlines()
    # Blank lines are junk: as anchors they make difflib pair a kept blank line and call
    # the unchanged statement beside it "replaced".
    matcher = difflib.SequenceMatcher(lambda line: not line.strip(), before, after, autojunk=False)
    problems = []
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag not in ("replace", "delete"):
            continue
        for i in range(i1, i2):
            line = before[i].strip()
            if line and not _imports_only(line) and i + 1 not in result.touched_lines:
                problems.append(f"line {i + 1} changed but no fixed finding covers it: {before[i].strip()!r}")
    return problems


def _imports_only(line: str) -> bool:
    """A line of imports (LibCST's import passes manage them), also joined by semicolons
    after a docstring (`'Doc.'; import torch; from torch.nn.utils import clip_grad_value_`,
    which loses the import the migration no longer uses)."""
    if line.startswith(("import ", "from ")):
        return True
    try:
        statements = ast.parse(line).body
    except SyntaxError:
        return False
    return any(isinstance(s, (ast.Import, ast.ImportFrom)) for s in statements) and all(
        isinstance(s, (ast.Import, ast.ImportFrom)) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        for s in statements
    )


def check_script(script: str, mode: str = "fix") -> tuple[FileResult | None, list[str]]:
    """Migrate `script` in `mode` and check every property; returns the result and the
    problems found (empty when all hold). An internal error stops the checks there."""
    compile(script, PATH, "exec", dont_inherit=True)  # generator sanity: valid input
    config = MODES[mode]
    result = migrate_source(script, PATH, config)
    if result.status is FileStatus.FAILED or result.error is not None or result.after is None:
        return result, [f"migration failed: {result.error}"]
    problems = []
    if result.before != script:
        problems.append("FileResult.before is not the input text")
    try:
        cst.parse_module(result.after)
        compile(result.after, PATH, "exec", dont_inherit=True)
    except (SyntaxError, cst.ParserSyntaxError) as exc:
        return result, [f"migrated code does not parse or compile: {exc}"]
    problems += malformed_findings(result) + duplicate_findings(result) + new_unbound_names(result)
    if config.fix:
        problems += untouched_lines_changed(result)
    else:
        if result.after != script:
            problems.append("lint mode (fix=False) changed the file")
        return result, problems
    again = migrate_source(result.after, PATH, config)
    if again.status is FileStatus.FAILED:
        problems.append(f"second run failed: {again.error}")
    elif again.after != result.after:
        problems.append("a second run changed the output (not idempotent)")
    return result, problems


def unexplained(problems: list[str]) -> list[str]:
    """The problems no KNOWN_BUGS entry accounts for."""
    return [p for p in problems if known_bug(p) is None]
