"""Syntax real scripts use and the fragments alone never produce (what the crash sweep,
bench/sweep.py, meets in public repositories): statements joined by semicolons, and a
one-statement body written after the colon (`if step: x = x.cuda()`).

Both are rewrites of the assembled lines that keep the program's meaning; the other
shapes (walrus, match, decorators, nested functions, lambdas with defaults,
star-unpacking) are fragment variants chosen in choices.py.
"""

from __future__ import annotations

from tests.property.choices import Chooser

# Statements that open a block (their line ends with ":") or end control flow (what
# follows them on the line would never run, a different program).
_HEADERS = ("if ", "elif ", "else", "for ", "while ", "with ", "try", "except", "finally", "def ", "class ", "match ", "case ")
_ENDS = ("return", "break", "continue", "raise", "pass")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _simple(line: str) -> bool:
    """A line holding simple statements only (no block header, decorator or comment)."""
    text = line.strip()
    return bool(text) and not text.startswith(("#", "@", *_HEADERS)) and not text.endswith(":")


def join_semicolons(lines: list[str], c: Chooser, p: float = 0.3) -> list[str]:
    """`a = 1` and `b = 2` at one indentation, one after the other → `a = 1; b = 2`."""
    out: list[str] = []
    for line in lines:
        prev = out[-1] if out else ""
        if (
            _simple(prev) and _simple(line) and _indent(prev) == _indent(line)
            and not prev.strip().startswith(_ENDS) and c.flag(p)
        ):
            out[-1] = f"{prev}; {line.strip()}"
        else:
            out.append(line)
    return out


def one_line_bodies(lines: list[str], c: Chooser, p: float = 0.4) -> list[str]:
    """A block header followed by a one-line body (and nothing more in the block) →
    `header: body` on one line."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        body = lines[i + 1] if i + 1 < len(lines) else ""
        after = lines[i + 2] if i + 2 < len(lines) else ""
        text = line.strip()
        if (
            text.startswith(_HEADERS) and not text.startswith(("class ", "match ")) and text.endswith(":")
            and _simple(body) and _indent(body) > _indent(line)
            and (not after.strip() or _indent(after) <= _indent(line)) and c.flag(p)
        ):
            out.append(f"{line} {body.strip()}")
            i += 2
            continue
        out.append(line)
        i += 1
    return out
