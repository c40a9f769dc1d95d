"""Hypothesis profiles for the property tests: `ci` (the default, a short run) and `long`.

Pick one with HYPOTHESIS_PROFILE=long. The profiles are applied by the tests in this
directory only (tests/property/strategies.py:profile), not loaded globally.
"""

from hypothesis import HealthCheck, Phase, settings

# One example migrates a whole script twice (~0.1 s on this 2-core machine at 85a65fb+),
# so the default run keeps the example count modest; `long` is for hunting. `ci` does
# not shrink: shrinking costs a migration per step and can run past pytest's timeout;
# the failing example is printed whole and saved in .hypothesis/, where a `long` run
# (or `python -m tests.property.minimise`) shrinks it.
settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "long",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
