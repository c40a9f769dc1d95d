"""The distributed runtime migrated scripts import: `from runtime import Accelerator, set_seed`.

Importing it has no side effects: no environment reads, no device probing, no warning filters.
"""

from runtime.accelerator import Accelerator
from runtime.rng import set_seed

__version__ = "0.1.0"

__all__ = ["Accelerator", "set_seed", "__version__"]
