"""AM228: a layer a model class builds and never uses gets no gradient, and DDP stops."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.ddp_options import built_here, unused_option_action
from migrator.analysis.handed_models import handed_model
from migrator.analysis.unused_layers import UnusedLayer
from migrator.rule import Example, Rule


class LayerNeverUsed(Rule):
    """## What it does
    Finds a layer with parameters that a model class builds in `__init__`
    (`self.linear_edge_f = nn.Linear(h, h)`) and that nothing in the file uses again: no
    method reads it, nothing binds it again or reaches it by name (`getattr`, a walk over
    the class's children). The Accelerator is then created with
    `kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)]` (AM001
    writes it), and this note says why. An Accelerator the script already creates is its
    author's: the note then asks for the option.

    ## Why is this bad?
    The layer is still a submodule: its weights are in `model.parameters()` and in the
    optimizer, but they take no part in the loss and never get a gradient. On one process
    that is harmless; under DistributedDataParallel every process waits for all gradients
    of a step before the next, and the second step stops with "Expected to have finished
    reduction in the prior iteration ... find_unused_parameters=True".

    ## Example
    ```python
    class Cell(nn.Module):
        def __init__(self, h):
            super().__init__()
            self.linear_in = nn.Linear(h, h)
            self.linear_unused = nn.Linear(h, h)

        def forward(self, x):
            return self.linear_in(x)
    ```

    Use instead: (what the migration writes)
    ```python
    accelerator = Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])
    ```
    or, cheaper (DDP then need not search for unused parameters at every step), delete the
    layer where no checkpoint needs its keys.

    ## Known limits
    Only layers of `torch.nn` with parameters (linear, convolutions, embeddings, recurrent
    layers, norms, attention, `nn.Parameter`) bound as `self.<name>` in `__init__`; a
    class another class of the file builds on, or one that reaches its submodules by name,
    is left alone. A layer used only in a method that does not run in `forward` is used as
    far as this rule sees. A model class of another file of the run is reported at the
    call that builds it.
    """

    code = "AM228"
    name = "layer-never-used"
    message = (
        "`{attribute}` {where} (`{layer}`) is never used, so its parameters get no gradient and DDP would stop "
        "at the second step: {action} `DistributedDataParallelKwargs(find_unused_parameters=True)`; cheaper, where "
        "no checkpoint needs its keys: {cheaper}"
    )
    examples = (
        Example(
            before=(
                "import torch\nfrom torch import nn\n\n\nclass Cell(nn.Module):\n"
                "    def __init__(self):\n        super().__init__()\n"
                "        self.linear_in = nn.Linear(4, 4)\n        self.linear_unused = nn.Linear(4, 4)\n\n"
                "    def forward(self, x):\n        return self.linear_in(x)\n\n\n"
                "model = Cell()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            ),
            after=None,
            at=("9:30",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        patterns = analysis.patterns
        if not analysis.migrating:
            self._handed_on()
            return
        if patterns is None or not patterns.ddp.layers:
            return
        action = unused_option_action(analysis)
        for unused in patterns.ddp.layers:
            self.report(unused.built, action=action, **_fields(unused))

    def _handed_on(self) -> None:
        """A set-up left as written that builds a model of another file and hands it to a
        training that gets no Accelerator (AM001 asks for one before the model): the layer
        is named, for the Accelerator made by hand (Chinese-Text-Classification's run.py,
        whose Transformer keeps a template encoder it only copies)."""
        analysis = self.analysis
        handed = handed_model(analysis, self.ctx.config)
        if handed is None:
            return
        layers = [u for u in built_here(analysis.facts, dict(self.ctx.config.project_unused)) if isinstance(u, UnusedLayer)]
        for unused in layers:
            action = f"left as written: once `{handed.binding.name}` is prepared by hand (AM001), the Accelerator needs"
            self.report(unused.built, action=action, **_fields(unused))


def _fields(unused: UnusedLayer) -> dict[str, str]:
    """A template kept only to be copied goes after the copies are made (deleted before,
    the copies would have nothing to copy)."""
    copied = "copy.deepcopy" in unused.where
    attribute = unused.attribute
    cheaper = f"`del {attribute}` once the copies are made" if copied else "delete the layer"
    return {"attribute": attribute, "where": unused.where, "layer": unused.layer, "cheaper": cheaper}
