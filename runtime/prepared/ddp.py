"""DistributedDataParallel that answers for the user's module: what DDP lacks, the module has.

Calling the prepared model goes through DDP (so gradients are averaged); reading an attribute
or calling a method DDP does not define (`model.generate(...)`, `model.config`, `model.head`)
reaches the user's module, as Lightning Fabric's wrapper does. Accelerate's prepared model is
plain DDP, where these raise AttributeError and scripts write `accelerator.unwrap_model(model)`
(the migrator still writes that, so migrated scripts run on both).
"""

from __future__ import annotations

from typing import Any

from torch.nn.parallel import DistributedDataParallel


class ForwardingDDP(DistributedDataParallel):
    """A DDP wrapper whose missing attributes are looked up on the wrapped module.

    Everything else is DDP's: `state_dict()` keys keep their `module.` prefix, hooks and
    `isinstance(model, DistributedDataParallel)` behave as before. Names DDP itself defines
    (`device`, `module`, `no_sync`, `forward`, ...) answer for DDP. Methods reached this way
    run on the module directly, outside DDP's forward: use them for inference or inspection
    (generate, init_hidden), and train through `model(...)`. Setting an attribute sets it on
    the wrapper, as for any module; set it on `model.module` to change the user's module.
    """

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError as missing:
            # `module` lives in _modules; before DDP's __init__ stores it there is nothing to ask.
            modules = self.__dict__.get("_modules", {})
            module = modules.get("module")
            if module is None:
                raise
            try:
                return getattr(module, name)
            except AttributeError:
                raise AttributeError(
                    f"'{type(module).__name__}' (prepared with DistributedDataParallel) has no attribute '{name}'"
                ) from missing
