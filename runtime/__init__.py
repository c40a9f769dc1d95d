"""The distributed runtime migrated scripts import: `from runtime import Accelerator, set_seed`
(and, in a notebook, `notebook_launcher`).

Importing it has no side effects: no environment reads, no device probing, no warning filters.
"""

from runtime.accelerator import Accelerator
from runtime.fsdp_plugin import FullyShardedDataParallelPlugin
from runtime.notebook import notebook_launcher
from runtime.rng import set_seed

__version__ = "0.1.0"

__all__ = ["Accelerator", "FullyShardedDataParallelPlugin", "notebook_launcher", "set_seed", "__version__"]
