"""Hypothesis strategies over tests/property/scriptgen.py, and the active profile."""

from __future__ import annotations

import os
from typing import Sequence, TypeVar

from hypothesis import settings
from hypothesis import strategies as st

from tests.property.scriptgen import training_script

T = TypeVar("T")

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")


def profile() -> settings:
    """The settings of the profile named by HYPOTHESIS_PROFILE (default `ci`)."""
    return settings.get_profile(PROFILE)


class DrawChooser:
    """Generator decisions as hypothesis draws, so failing scripts shrink."""

    def __init__(self, draw) -> None:
        self.draw = draw

    def pick(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(options))

    def flag(self, p: float = 0.5) -> bool:
        # integers shrink towards 0, i.e. towards False (no optional fragment)
        return self.draw(st.integers(0, 99)) >= round(100 * (1 - p))

    def number(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))


@st.composite
def training_scripts(draw, noise: float = 0.15) -> str:
    """A whole training script assembled from fragments (see scriptgen), with the less
    common syntax real scripts use (choices.SHAPES)."""
    return training_script(DrawChooser(draw), noise, shapes=True)
