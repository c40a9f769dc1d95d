"""Rule documentation as Markdown text: the rule table and one rule's page.

Generated from the Rule classes (code, name, message, fix, safety, docstring, examples),
never written by hand; prints nothing (render/ shows it, scripts/ writes the README).
"""

from __future__ import annotations

import inspect
import re
from typing import Iterable

from migrator.rule import FixAvailability, Rule, Safety

TABLE_START = "<!-- rules:start -->"
TABLE_END = "<!-- rules:end -->"

# A placeholder glued to the text before it, outside a `code span`
# (`...Accelerator{note}`, `...process{wrapped};`), is an optional suffix a finding may
# add ("left as written: ..."); the summary leaves it out.
_PLACEHOLDER = re.compile(r"\{\w+\}")


def _is_suffix(message: str, start: int) -> bool:
    before = message[start - 1] if start else " "
    return not before.isspace() and before not in "([" and message[:start].count("`") % 2 == 0


def rule_summary(rule: type[Rule]) -> str:
    """The rule's message as its one-line summary. `{placeholders}` are kept as Ruff's
    rule table keeps them (they say what the finding will name), except optional
    suffixes glued to the text before them."""
    message = rule.message
    kept = []
    last = 0
    for match in _PLACEHOLDER.finditer(message):
        if _is_suffix(message, match.start()):
            kept.append(message[last:match.start()])
            last = match.end()
    kept.append(message[last:])
    return " ".join("".join(kept).split())


def fix_label(rule: type[Rule]) -> str:
    """`always`, `sometimes` or `no`, with `(unsafe)` when the fix needs --unsafe-fixes."""
    label = {FixAvailability.ALWAYS: "always", FixAvailability.SOMETIMES: "sometimes"}.get(rule.fix, "no")
    if rule.fix is not FixAvailability.NEVER and rule.safety is Safety.UNSAFE:
        label += " (unsafe)"
    return label


def rule_table(rules: Iterable[type[Rule]]) -> str:
    """The README's Markdown table: one row per rule, in code order."""
    rows = ["| Code | Name | Fix | Summary |", "|---|---|---|---|"]
    for rule in sorted(rules, key=lambda r: r.code):
        summary = rule_summary(rule).replace("|", "\\|")
        rows.append(f"| {rule.code} | `{rule.name}` | {fix_label(rule)} | {summary} |")
    return "\n".join(rows) + "\n"


def replace_table(readme: str, table: str) -> str:
    """`readme` with the text between the rule-table markers replaced by `table`.

    Raises ValueError when the markers are missing, so a generator never silently
    appends a second table.
    """
    start, end = readme.find(TABLE_START), readme.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"README has no {TABLE_START} ... {TABLE_END} markers")
    head = readme[: start + len(TABLE_START)]
    return f"{head}\n{table}{readme[end:]}"


def explanation(rule: type[Rule]) -> str:
    """The rule's page, as `accel-migrate --explain` shows it (Markdown)."""
    lines = [
        f"# {rule.code} {rule.name}",
        "",
        f"**Message:** {rule_summary(rule)}  ",
        f"**Fix:** {_fix_sentence(rule)}  ",
        f"**Targets:** {', '.join(sorted(t.value for t in rule.targets))}",
        "",
        inspect.cleandoc(rule.__doc__ or "(no explanation yet)"),
    ]
    if rule.examples:
        lines += ["", "## Checked examples", ""]
        for number, example in enumerate(rule.examples, 1):
            lines += _example(rule, number, example)
    return "\n".join(lines).rstrip() + "\n"


def _fix_sentence(rule: type[Rule]) -> str:
    if rule.fix is FixAvailability.NEVER:
        return "none; the finding is reported and the code is left as it is"
    how = "always" if rule.fix is FixAvailability.ALWAYS else "sometimes"
    title = f" ({rule.fix_title})" if rule.fix_title else ""
    if rule.safety is Safety.UNSAFE:
        return f"{how} available{title}; unsafe, applied only with `--unsafe-fixes`"
    return f"{how} available{title}; safe, applied by `--write`"


def _example(rule: type[Rule], number: int, example) -> list[str]:
    where = ", ".join(example.at) if example.at else "—"
    lines = [f"Example {number}, reported at {where}:", "", "```python", example.before.rstrip("\n"), "```", ""]
    if example.refused is not None:
        lines += ["A migration that would write this is refused, and the file is left as it is:", "",
                  "```python", example.refused.rstrip("\n"), "```", ""]
    elif example.after is None:
        lines += ["Left as it is (report only).", ""]
    else:
        lines += ["After `accel-migrate --write`:", "", "```python", example.after.rstrip("\n"), "```", ""]
    return lines
