"""Inline suppression comments: `# accel-migrate: ignore` or `ignore[AM101, AM104]`."""

from __future__ import annotations

import re

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
