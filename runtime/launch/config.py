"""Launch defaults from `[tool.accel-launch]` in the project's pyproject.toml; flags win.

The nearest pyproject.toml from the working directory upward is read, so a project sets
its process count or FSDP settings once. Reading is all this module does: it returns
plain values, and LaunchConfig checks them as it checks flags.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SECTION = "accel-launch"
# Setting -> the type a value must have (the same names as LaunchConfig's fields).
_TYPES: dict[str, type | tuple[type, ...]] = {
    "nproc_per_node": int,
    "nnodes": int,
    "mixed_precision": str,
    "cpu": bool,
    "fsdp": bool,
    "fsdp_wrap_classes": (list, str),
    "fsdp_min_num_params": int,
    "fsdp_reshard_after_forward": bool,
    "fsdp_cpu_offload": bool,
    "process_group_timeout": (int, float),
}
# Friendlier spellings accepted in the file.
_ALIASES = {"processes": "nproc_per_node", "machines": "nnodes"}


class LaunchFileError(ValueError):
    """A `[tool.accel-launch]` table that cannot be used; the message names the file."""


@dataclass(frozen=True)
class LaunchDefaults:
    """The settings a pyproject.toml gave, and where it is (None: no file with the table)."""

    values: Mapping[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def merged(self, flags: Mapping[str, Any]) -> dict[str, Any]:
        """Flags given on the command line (not None) win over the file's values; `--no-fsdp`
        also sets aside the file's fsdp_* details."""
        merged = dict(self.values)
        if flags.get("fsdp") is False:
            merged = {key: value for key, value in merged.items() if not key.startswith("fsdp_")}
        merged.update({key: value for key, value in flags.items() if value is not None})
        return merged


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml in `start` or a folder above it."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_defaults(start: Path | None = None) -> LaunchDefaults:
    """Read `[tool.accel-launch]` from the nearest pyproject.toml (none: empty defaults)."""
    path = find_pyproject((start or Path.cwd()).resolve())
    if path is None:
        return LaunchDefaults()
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise LaunchFileError(f"{path}: cannot read it: {error}") from None
    table = document.get("tool", {}).get(SECTION)
    if table is None:
        return LaunchDefaults(path=None)
    if not isinstance(table, dict):
        raise LaunchFileError(f"{path}: [tool.{SECTION}] must be a table")
    return LaunchDefaults(values=_checked(table, path), path=path)


def _checked(table: Mapping[str, Any], path: Path) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for raw_key, value in table.items():
        key = raw_key.replace("-", "_")
        key = _ALIASES.get(key, key)
        expected = _TYPES.get(key)
        if expected is None:
            known = ", ".join(sorted(_TYPES))
            raise LaunchFileError(f"{path}: [tool.{SECTION}] has an unknown setting {raw_key!r} (known: {known})")
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise LaunchFileError(f"{path}: [tool.{SECTION}] {raw_key} = {value!r} has the wrong type")
        if key == "fsdp_wrap_classes":
            value = tuple(_class_names(value, raw_key, path))
        if key == "mixed_precision":
            value = value.lower()
        values[key] = value
    return values


def _class_names(value: list[Any] | str, raw_key: str, path: Path) -> list[str]:
    names = value.split(",") if isinstance(value, str) else value
    if not all(isinstance(name, str) for name in names):
        raise LaunchFileError(f"{path}: [tool.{SECTION}] {raw_key} must list class names as strings")
    return [name.strip() for name in names if name.strip()]
