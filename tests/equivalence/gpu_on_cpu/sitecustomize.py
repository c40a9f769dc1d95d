"""Lets an ORIGINAL script written for one GPU run on a CPU-only machine (tests only).

The equivalence harness puts this folder on PYTHONPATH for the original scripts, never for
migrated ones: where no GPU is visible, `tensor.cuda()` and `module.cuda()` return the
object unchanged, as `.to("cpu")` would. A migrated script must run without it.
"""

import torch

if not torch.cuda.is_available():
    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    torch.nn.Module.cuda = lambda self, *args, **kwargs: self
