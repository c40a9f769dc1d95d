"""Regenerate the README's rule table (between <!-- rules:start --> and <!-- rules:end -->)
from the rule registry. `--check` only reports whether it is stale (exit 1 if so).

    python scripts/gen_rule_table.py          # rewrite README.md
    python scripts/gen_rule_table.py --check  # CI: is it up to date?
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from migrator import docs, registry  # noqa: E402  (needs ROOT on sys.path first)

README = ROOT / "README.md"


def expected_readme(text: str) -> str:
    """README text with a freshly generated table between the markers."""
    return docs.replace_table(text, docs.rule_table(registry.all_rules()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is stale; write nothing")
    args = parser.parse_args(argv)
    current = README.read_text(encoding="utf-8")
    fresh = expected_readme(current)
    if fresh == current:
        print("README rule table is up to date.")
        return 0
    if args.check:
        print("README rule table is stale: run python scripts/gen_rule_table.py", file=sys.stderr)
        return 1
    README.write_text(fresh, encoding="utf-8")
    print("README rule table regenerated.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
