"""Shared helpers for walking fixtures/: load a case's config and render findings.

One place, so the snapshot test and the coverage meta-test read cases the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

from migrator.config import Config, Target
from migrator.findings import Finding

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def cases() -> list[Path]:
    """Every fixture directory with an input script, sorted (one test id each)."""
    return sorted(p.parent for p in FIXTURES.glob("*/input.py"))


def case_config(case: Path) -> Config:
    """`case.toml` → Config: select, ignore, target, unsafe (all optional)."""
    path = case / "case.toml"
    data = tomllib.loads(path.read_text()) if path.exists() else {}
    return Config(
        select=tuple(data.get("select", ())),
        ignore=tuple(data.get("ignore", ())),
        target=Target(data.get("target", "runtime")),
        unsafe_fixes=bool(data.get("unsafe", False)),
    )


def render_findings(findings: tuple[Finding, ...] | list[Finding]) -> str:
    """One line per finding, "line:col CODE message" + " (fixed)" or " [*]"."""
    lines = []
    for f in sorted(findings, key=lambda f: (not f.fixed, f.start, f.code, f.message)):
        mark = " (fixed)" if f.fixed else (" [*]" if f.fixable else "")
        lines.append(f"{f.start} {f.code} {f.message}{mark}")
    return "\n".join(lines) + ("\n" if lines else "")
