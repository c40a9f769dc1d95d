"""Hypothesis profiles for the property tests: `ci` (the default, a short run) and `long`.

Pick one with HYPOTHESIS_PROFILE=long. The profiles are applied by the tests in this
directory only (tests/property/strategies.py:profile), not loaded globally.
"""

from hypothesis import HealthCheck, settings

# One example migrates a whole script twice (~0.4 s on the 2-core CI machine), so
# the default run keeps the example count modest; `long` is for hunting.
settings.register_profile(
    "ci",
    max_examples=150,
    deadline=None,
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
