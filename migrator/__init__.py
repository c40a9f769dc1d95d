"""accel-migrate's engine: migrate PyTorch training scripts onto the Accelerator API.

Public API re-exports only; see api.py for the entry points. They load on first use
(PEP 562), so `accel-migrate --help` does not pay for importing LibCST.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from migrator.api import migrate_paths, migrate_source
    from migrator.notebook import migrate_notebook
    from migrator.config import Config
    from migrator.findings import FileResult, FileStatus, Finding, Severity

__all__ = [
    "Config",
    "FileResult",
    "FileStatus",
    "Finding",
    "Severity",
    "migrate_notebook",
    "migrate_paths",
    "migrate_source",
]

__version__ = "0.1.0"

_HOMES = {
    "migrate_notebook": "migrator.notebook",
    "migrate_paths": "migrator.api",
    "migrate_source": "migrator.api",
    "Config": "migrator.config",
    "FileResult": "migrator.findings",
    "FileStatus": "migrator.findings",
    "Finding": "migrator.findings",
    "Severity": "migrator.findings",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'migrator' has no attribute {name!r}")
