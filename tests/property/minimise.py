"""Shrink a failing script by deleting lines while the same property still fails.

Hypothesis shrinks too, but one example costs a whole migration, so shrinking a long
script there can take minutes; this line-based delta debugging is the quick route to a
snippet worth putting in a bug report or an `@example`:

    .venv/bin/python -m tests.property.minimise failing.py [--mode fix] [--match REGEX]

The failure to keep is the first line of the assertion message of `check_script`
(or REGEX, searched in it). Lines are deleted, then indented blocks dedented away,
as long as the script still compiles and still fails that way.
"""

from __future__ import annotations

import argparse
import re
import sys

from tests.property.test_migrate_properties import check_script


def failure(script: str, mode: str) -> str | None:
    """The first line of the property failure for `script`, or None when it passes."""
    try:
        compile(script, "candidate.py", "exec", dont_inherit=True)
    except SyntaxError:
        return None
    try:
        check_script(script, mode)
    except AssertionError as exc:
        return (str(exc).splitlines() or ["AssertionError"])[0]
    return None


def minimise(script: str, mode: str, keep: re.Pattern[str]) -> str:
    """The smallest script found (by whole lines) that still fails matching `keep`."""

    def still_fails(lines: list[str]) -> bool:
        message = failure("\n".join(lines) + "\n", mode)
        return message is not None and bool(keep.search(message))

    lines = script.splitlines()
    chunk = max(1, len(lines) // 2)
    while chunk >= 1:
        i, progress = 0, False
        while i < len(lines):
            candidate = lines[:i] + lines[i + chunk :]
            if candidate and still_fails(candidate):
                lines, progress = candidate, True
            else:
                i += chunk
        if not progress:
            chunk //= 2
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--mode", default="fix", choices=["fix", "lint", "accelerate"])
    parser.add_argument("--match", help="regex the failure message must keep matching")
    args = parser.parse_args(argv)
    script = open(args.file, encoding="utf-8").read()
    message = failure(script, args.mode)
    if message is None:
        print("the script passes every property; nothing to minimise", file=sys.stderr)
        return 1
    kind = re.split(r"[:(`]", re.sub(r"^\S+:\d+:\d+: ", "", message))[0].strip()
    keep = re.compile(args.match or re.escape(kind))
    print(f"failure: {message}", file=sys.stderr)
    small = minimise(script, args.mode, keep)
    print(f"minimised to {len(small.splitlines())} lines: {failure(small, args.mode)}", file=sys.stderr)
    sys.stdout.write(small)
    return 0


if __name__ == "__main__":
    sys.exit(main())
