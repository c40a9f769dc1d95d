"""accel-migrate's engine: migrate PyTorch training scripts onto the Accelerator API.

Public API re-exports only; see api.py for the entry points.
"""

from migrator.api import migrate_paths, migrate_source
from migrator.config import Config
from migrator.findings import FileResult, FileStatus, Finding, Severity

__all__ = [
    "Config",
    "FileResult",
    "FileStatus",
    "Finding",
    "Severity",
    "migrate_paths",
    "migrate_source",
]

__version__ = "0.1.0"
