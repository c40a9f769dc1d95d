"""Run settings: which rules, which target, which fixes. Frozen; knows no rule by import."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Target(enum.Enum):
    """Which Accelerator the migrated code imports."""

    RUNTIME = "runtime"
    ACCELERATE = "accelerate"

    @property
    def module(self) -> str:
        """The module a migrated script imports `Accelerator` from."""
        return "runtime" if self is Target.RUNTIME else "accelerate"


@dataclass(frozen=True)
class Config:
    """Settings for one run. `select`/`ignore` hold codes, code prefixes or rule names."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    target: Target = Target.RUNTIME
    fix: bool = True
    unsafe_fixes: bool = False
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = field(default_factory=tuple)
    exclude: tuple[str, ...] = ()
