"""Every rule's own examples, through the real engine (the Fixit harness), and its
declared fix availability checked against behaviour (the Ruff harness)."""

from __future__ import annotations

import pytest

from migrator.api import migrate_source
from migrator.config import Config
from migrator.registry import all_rules
from migrator.rule import FixAvailability

CASES = [(rule, i, ex) for rule in all_rules() for i, ex in enumerate(rule.examples)]


@pytest.mark.parametrize(
    "rule,index,example", CASES, ids=[f"{r.code}-{i}" for r, i, _ in CASES]
)
def test_example(rule, index, example) -> None:
    lint = migrate_source(example.before, example.path, Config(fix=False))
    places = sorted(str(f.start) for f in lint.findings if f.code == rule.code)
    assert places, f"{rule.code}: the example gives no finding of this rule"
    if example.at:
        assert places == sorted(example.at)
    fixed = migrate_source(example.before, example.path, Config())
    if example.after is not None:
        assert fixed.after == example.after
        again = migrate_source(fixed.after, example.path, Config(fix=False))
        assert not [f for f in again.findings if f.code == rule.code]
    else:
        assert not [f for f in fixed.findings if f.code == rule.code and f.fixed]


@pytest.mark.parametrize("rule", all_rules(), ids=[r.code for r in all_rules()])
def test_declared_fix_matches_behaviour(rule) -> None:
    assert rule.examples, f"{rule.code} has no examples"
    fixable = []
    for example in rule.examples:
        result = migrate_source(example.before, example.path, Config(fix=False))
        fixable += [f.fixable for f in result.findings if f.code == rule.code]
    if rule.fix is FixAvailability.ALWAYS:
        assert all(fixable), f"{rule.code} declares ALWAYS but a finding had no fix"
    elif rule.fix is FixAvailability.NEVER:
        assert not any(fixable), f"{rule.code} declares NEVER but offered a fix"
    else:
        assert any(fixable), f"{rule.code} declares SOMETIMES but no example is fixable"
