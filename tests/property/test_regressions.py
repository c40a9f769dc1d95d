"""One test per minimised input the property tests found (tests/property/regressions.py).

A case whose bug is still open is a strict xfail: when the bug gets fixed it XPASSes,
which fails the run, the cue to drop its `bug=` and its properties.KNOWN_BUGS entry.
"""

from __future__ import annotations

import pytest

from tests.property.properties import KNOWN_BUGS, check_script
from tests.property.regressions import REGRESSIONS


def _param(case):
    marks = []
    if case.bug is not None:
        assert case.bug in KNOWN_BUGS, f"{case.name}: unknown bug key {case.bug!r}"
        marks.append(pytest.mark.xfail(strict=True, reason=f"open bug {case.bug}: {case.symptom}"))
    return pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in REGRESSIONS])
def test_regression(case) -> None:
    compile(case.script, case.name, "exec", dont_inherit=True)
    _, problems = check_script(case.script, case.mode)
    assert not problems, f"{case.symptom}\n" + "\n".join(problems)


def test_known_bugs_have_a_regression() -> None:
    """Every tolerated bug is pinned by a minimised case, so fixing it is noticed."""
    pinned = {c.bug for c in REGRESSIONS if c.bug}
    assert set(KNOWN_BUGS) <= pinned
    assert all(KNOWN_BUGS[k].regression in {c.name for c in REGRESSIONS} for k in KNOWN_BUGS)
