"""Facts about torch's own API that both the rules' analysis and the verifier rely on.

Kept apart from both, so the verifier stays independent of the rules' analysis while the
two never disagree about what torch is.
"""

from __future__ import annotations

# What a DistributedDataParallel wrapper answers like the model (torch.nn.Module's own
# API). `named_*` carry a `module.` prefix on the wrapper; names are mostly matched by
# substring, so they stay.
MODULE_API = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
    "modules", "named_modules", "train", "eval", "zero_grad", "to", "cuda", "cpu", "float",
    "half", "double", "bfloat16", "type", "requires_grad_", "apply", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook", "register_backward_hook",
    "register_full_backward_pre_hook", "register_buffer", "register_parameter", "add_module",
    "training", "forward", "__call__", "share_memory", "get_parameter", "get_submodule",
    "get_buffer", "extra_repr", "__class__", "compile",
})
