"""Every rule's own examples, through the real engine (the Fixit harness), and its
declared fix availability checked against behaviour (the Ruff harness)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from migrator.api import migrate_source
from migrator.config import Config
from migrator.registry import all_rules
from migrator.rule import FixAvailability
from migrator.verify import verify

CASES = [(rule, i, ex) for rule in all_rules() for i, ex in enumerate(rule.examples)]


@pytest.mark.parametrize(
    "rule,index,example", CASES, ids=[f"{r.code}-{i}" for r, i, _ in CASES]
)
def test_example(rule, index, example) -> None:
    if rule.reported_by_verifier:
        _check_refusal(rule, example)
        return
    base = Config(
        project_calls=example.project_calls, project_states=example.project_states,
        project_distribution=example.project_distribution,
    )
    lint = migrate_source(example.before, example.path, replace(base, fix=False))
    places = sorted(str(f.start) for f in lint.findings if f.code == rule.code)
    assert places, f"{rule.code}: the example gives no finding of this rule"
    if example.at:
        assert places == sorted(example.at)
    fixed = migrate_source(example.before, example.path, base)
    if example.after is not None:
        assert fixed.after == example.after
        again = migrate_source(fixed.after, example.path, replace(base, fix=False))
        assert not [f for f in again.findings if f.code == rule.code]
    else:
        assert not [f for f in fixed.findings if f.code == rule.code and f.fixed]


def _check_refusal(rule, example) -> None:
    """A verifier code: migrating the example is refused, the text stays as it was, and
    the finding is where the example says. With `refused`, the verifier alone is asked
    about that migration."""
    if example.refused is not None:
        found = verify(example.before, example.refused)
        assert sorted(f"{p.line}:{p.col}" for p in found if p.code == rule.code) == sorted(example.at)
        return
    result = migrate_source(example.before, example.path, Config())
    assert result.after == example.before, f"{rule.code}: the example was migrated, not refused"
    places = sorted(str(f.start) for f in result.findings if f.code == rule.code)
    assert places == sorted(example.at), f"{rule.code}: refusal findings at {places}"
    assert not any(f.fixable for f in result.findings), "a refused file offers no fix"


@pytest.mark.parametrize("rule", all_rules(), ids=[r.code for r in all_rules()])
def test_declared_fix_matches_behaviour(rule) -> None:
    assert rule.examples, f"{rule.code} has no examples"
    fixable = []
    for example in rule.examples:
        if example.refused is not None:
            continue  # the verifier alone: it offers no fix
        config = Config(
            project_calls=example.project_calls, project_states=example.project_states,
            project_distribution=example.project_distribution, fix=rule.reported_by_verifier,
        )
        result = migrate_source(example.before, example.path, config)
        fixable += [f.fixable for f in result.findings if f.code == rule.code]
    if rule.fix is FixAvailability.ALWAYS:
        assert all(fixable), f"{rule.code} declares ALWAYS but a finding had no fix"
    elif rule.fix is FixAvailability.NEVER:
        assert not any(fixable), f"{rule.code} declares NEVER but offered a fix"
    else:
        assert any(fixable), f"{rule.code} declares SOMETIMES but no example is fixable"
