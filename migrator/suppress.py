"""Inline suppression comments: `# accel-migrate: ignore` or `ignore[AM101, AM104]`, and
which of them silenced nothing (reported as AM902 unused-suppression)."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Iterable

_COMMENT = re.compile(r"#\s*accel-migrate:\s*ignore(?:\[(?P<codes>[A-Za-z0-9_,\s-]*)\])?")


def suppressed_codes(line: str) -> set[str] | None:
    """None when the line has no suppression; an empty set means "every code"."""
    match = _COMMENT.search(line)
    if match is None:
        return None
    codes = match.group("codes")
    if codes is None:
        return set()
    return {c.strip().upper() for c in codes.split(",") if c.strip()}


def is_suppressed(lines: list[str], line: int, code: str, name: str) -> bool:
    """Whether a finding of `code` at 1-based `line` is silenced by a comment there."""
    if not 1 <= line <= len(lines):
        return False
    codes = suppressed_codes(lines[line - 1])
    if codes is None:
        return False
    return not codes or code.upper() in codes or name.upper() in codes


# -- unused suppressions (AM902) -------------------------------------------------------------

UNUSED_SUPPRESSION = "AM902"  # the code of rules/am902_unused_suppression.py


@dataclass(frozen=True)
class Suppression:
    """One `# accel-migrate: ignore[...]` comment: 1-based line and column, and its codes
    (empty: every code)."""

    line: int
    col: int
    codes: frozenset[str]


def suppressions(code: str) -> list[Suppression]:
    """The suppression comments of `code`: real comments only, not text in strings."""
    if "accel-migrate" not in code:
        return []
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.COMMENT:
                codes = suppressed_codes(token.string)
                if codes is not None:
                    found.append(Suppression(token.start[0], token.start[1] + 1, frozenset(codes)))
    except (tokenize.TokenError, SyntaxError):  # the engine only sees parsed code; be safe anyway
        return []
    return found


def unused_suppressions(
    code: str, used: Iterable[tuple[int, str, str]], ran: Iterable[tuple[str, str]]
) -> list[tuple[Suppression, tuple[str, ...]]]:
    """Suppressions that silenced nothing, with the codes that went unused (empty for a
    bare `ignore`). `used` holds (line, code, name) of every suppressed finding; `ran`
    the (code, name) of the rules that ran. A code of a rule that did not run is not
    judged: it may be for a rule this run did not select."""
    used_at: dict[int, set[str]] = {}
    for line, rule_code, rule_name in used:
        used_at.setdefault(line, set()).update({rule_code.upper(), rule_name.upper()})
    ran_keys = {key.upper(): rule_code.upper() for rule_code, name in ran for key in (rule_code, name)}
    out = []
    for s in suppressions(code):
        hits = used_at.get(s.line, set())
        if UNUSED_SUPPRESSION in s.codes:
            continue
        if not s.codes:
            if not hits:
                out.append((s, ()))
            continue
        idle = tuple(sorted(c for c in s.codes if c in ran_keys and ran_keys[c] not in hits and c not in hits))
        if idle:
            out.append((s, idle))
    return out
