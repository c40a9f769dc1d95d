"""Prints what the launcher gave this process: world size and the settings it passed on."""

import os

from runtime import process

names = ("WORLD_SIZE", process.ENV_MIXED_PRECISION, process.ENV_USE_FSDP, process.ENV_FSDP_WRAP_CLASSES,
         process.ENV_OMP_NUM_THREADS)  # fmt: skip
print(" ".join(f"{name}={os.environ.get(name, '-')}" for name in names))
